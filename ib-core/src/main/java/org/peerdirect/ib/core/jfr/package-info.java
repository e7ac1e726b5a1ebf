/**
 * ib-core's JDK Flight Recorder events ({@link org.peerdirect.ib.core.jfr.IbCoreEvents}) and the
 * peer-client wrapper that records each callback ({@link org.peerdirect.ib.core.jfr.TracedPeerClient}).
 * Not exported.
 */
package org.peerdirect.ib.core.jfr;
