package org.peerdirect.hca.engine;

import org.peerdirect.hca.boards.Fabric;

/** One port of a device on the {@link Fabric}. */
public final class HcaPort implements Fabric.Port {
    final HcaDevice device;
    final int portNum;
    volatile int lid;
    volatile boolean active;
    /** The port's MAC/IP layer when its link is a wire ({@link HcaDevice#attachWire}); null: the in-JVM fabric. */
    volatile WirePort wire;
    /** The port's traffic and transport counters (read by the personalities' counter commands). */
    final PortCounters counters = new PortCounters();

    HcaPort(HcaDevice device, int portNum) {
        this.device = device;
        this.portNum = portNum;
    }

    /**
     * The QP {@code qpn} behind endpoint {@code lid} as a port of {@code from} sees it, or null
     * when unreachable (no such endpoint, a port on the fabric that is no engine's, or one on the
     * other link layer: InfiniBand and Ethernet ports share the endpoint numbering but not the
     * wire). The data path's one lookup: an array read and a type test.
     */
    static HwQp resolve(HcaDevice from, int lid, int qpn) {
        return from.fabric.port(lid) instanceof HcaPort p && p.device.ethernet == from.ethernet ? p.device.qp(qpn) : null;
    }

    @Override
    public int lid() {
        return lid;
    }

    public int portNum() {
        return portNum;
    }

    public boolean active() {
        return active;
    }

    /** The port's counters, for the personality's counter commands (the drivers' only way to them). */
    public PortCounters counters() {
        return counters;
    }

    /** The port's wire (addresses, counters, neighbours), or null when it is on the in-JVM fabric. */
    public WirePort wire() {
        return wire;
    }
}
