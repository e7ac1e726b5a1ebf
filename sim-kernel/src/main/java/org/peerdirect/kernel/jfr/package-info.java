/**
 * sim-kernel's JDK Flight Recorder events ({@link org.peerdirect.kernel.jfr.KernelEvents}).
 * Not exported: each bundle owns the events it commits; a recording names them
 * {@code org.peerdirect.*}.
 */
package org.peerdirect.kernel.jfr;
