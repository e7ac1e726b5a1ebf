/** The mlx5 driver's JDK Flight Recorder events ({@link org.peerdirect.mlx5.jfr.Mlx5JfrEvents}). Not exported. */
package org.peerdirect.mlx5.jfr;
