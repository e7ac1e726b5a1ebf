package org.peerdirect.hca.engine;

/**
 * The subnet that links the ports of devices in one JVM: it assigns LIDs (as a subnet manager
 * does) and routes a packet to the port with the destination LID. Lookup is an array read.
 */
@org.osgi.service.component.annotations.Component(service = Fabric.class, immediate = true)
public final class Fabric {

    /** Unicast LIDs are 1..0xBFFF. */
    static final int MAX_LID = 0xC000;

    private final HcaPort[] byLid = new HcaPort[MAX_LID];
    /** Guarded by this. */
    private int nextLid = 1;

    /** Brings a port up: assigns it the next LID. */
    synchronized int attach(HcaPort port) {
        int lid = nextLid++;
        if (lid >= MAX_LID) {
            throw new IllegalStateException("fabric is out of LIDs");
        }
        byLid[lid] = port;
        return lid;
    }

    /** Takes a port off the subnet: packets to its LID are lost from now on. */
    synchronized void detach(HcaPort port) {
        if (port.lid > 0 && port.lid < MAX_LID && byLid[port.lid] == port) {
            byLid[port.lid] = null;
        }
    }

    /** The port with this LID, or null (unassigned, or its device removed). */
    HcaPort port(int lid) {
        return lid > 0 && lid < MAX_LID ? byLid[lid] : null;
    }

    /**
     * The QP {@code qpn} behind endpoint {@code lid} as a port of {@code from} sees it, or null
     * when unreachable (no such endpoint, or one on the other link layer: InfiniBand and
     * Ethernet ports share the endpoint numbering but not the wire).
     */
    HwQp resolve(HcaDevice from, int lid, int qpn) {
        HcaPort p = port(lid);
        return p == null || p.device.ethernet != from.ethernet ? null : p.device.qp(qpn);
    }
}
