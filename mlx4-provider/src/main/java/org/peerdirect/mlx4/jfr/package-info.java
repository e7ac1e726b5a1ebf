/** The mlx4 driver's JDK Flight Recorder events ({@link org.peerdirect.mlx4.jfr.Mlx4JfrEvents}). Not exported. */
package org.peerdirect.mlx4.jfr;
