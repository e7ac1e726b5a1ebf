package org.peerdirect.rdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr.OdpCaps;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/**
 * What a run needs of the server's device (issue 45 item 5): a device that lacks any of it is
 * passed over, so the run falls back to the client's own device (loopback) instead of failing on
 * the next device of the list.
 */
class DeviceLookupTest {

    private static final int RC_ALL = OdpCaps.SUPPORT_SEND | OdpCaps.SUPPORT_RECV | OdpCaps.SUPPORT_WRITE | OdpCaps.SUPPORT_READ
            | OdpCaps.SUPPORT_ATOMIC;

    /** A device's probe: InfiniBand port, these flags and ODP caps, dma-buf MRs or not. */
    private static DeviceLookup.Caps device(int capFlags, long capsEx, OdpCaps odp, boolean dmabuf) {
        return new DeviceLookup.Caps(IbvPortAttr.LINK_LAYER_INFINIBAND, new IbvDeviceAttr("fw", 0, 0, 1L << 40, 4096, 0, 0, 0, 1, 1,
                capFlags, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, odp, capsEx | (capFlags & 0xffff_ffffL)), dmabuf);
    }

    /** A ConnectX-3 as mlx4 reports it: no ODP, no XRC here, no dma-buf MRs. */
    private static final DeviceLookup.Caps CX3 = device(0, 0, OdpCaps.NONE, false);
    /** A ConnectX-4 as mlx5 reports it: explicit and implicit ODP on RC and XRC, XRC, atomic write, dma-buf MRs. */
    private static final DeviceLookup.Caps CX4 = device((int) IbvDeviceAttr.DEVICE_XRC, IbvDeviceAttr.DEVICE_ATOMIC_WRITE,
            new OdpCaps(IbvDeviceAttr.ODP_SUPPORT | IbvDeviceAttr.ODP_SUPPORT_IMPLICIT, RC_ALL | OdpCaps.SUPPORT_ATOMIC_WRITE, 0, 0,
                    RC_ALL | OdpCaps.SUPPORT_SRQ_RECV, -1),
            true);

    @Test
    void eachNeedPassesOverADeviceWithoutIt() {
        DeviceLookup.Needs none = DeviceLookup.Needs.NONE;
        assertTrue(none.servedBy(CX3) && none.servedBy(CX4));
        DeviceLookup.Needs odp = none.rcOdp(false, OdpCaps.SUPPORT_SEND | OdpCaps.SUPPORT_RECV);
        assertFalse(odp.servedBy(CX3), "rdma:pingpong -o: a device without ODP cannot be the server");
        assertTrue(odp.servedBy(CX4));
        DeviceLookup.Needs implicit = none.rcOdp(true, OdpCaps.SUPPORT_SEND);
        assertTrue(implicit.servedBy(CX4));
        DeviceLookup.Caps explicitOnly = device(0, 0, new OdpCaps(IbvDeviceAttr.ODP_SUPPORT, RC_ALL, 0, 0, 0, -1), false);
        assertFalse(implicit.servedBy(explicitOnly), "-O needs IBV_ODP_SUPPORT_IMPLICIT");
        assertTrue(odp.servedBy(explicitOnly));
        DeviceLookup.Caps noRecv = device(0, 0, new OdpCaps(IbvDeviceAttr.ODP_SUPPORT, OdpCaps.SUPPORT_SEND, 0, 0, 0, -1), false);
        assertFalse(odp.servedBy(noRecv), "each RC ODP transport bit counts");
        assertFalse(none.dmabuf(true).servedBy(CX3), "--dmabuf: a driver without reg_user_mr_dmabuf cannot serve");
        assertTrue(none.dmabuf(true).servedBy(CX4));
        assertTrue(none.dmabuf(false).servedBy(CX3));
        DeviceLookup.Needs xrc = none.caps(0, IbvDeviceAttr.DEVICE_XRC);
        assertFalse(xrc.servedBy(CX3));
        assertTrue(xrc.servedBy(CX4));
        assertFalse(xrc.xrcOdp(OdpCaps.SUPPORT_SEND | OdpCaps.SUPPORT_SRQ_RECV).servedBy(explicitOnly), "no XRC ODP bits");
        assertTrue(xrc.xrcOdp(OdpCaps.SUPPORT_SEND | OdpCaps.SUPPORT_SRQ_RECV).servedBy(CX4));
        DeviceLookup.Needs atomicWrite = none.caps(IbvDeviceAttr.DEVICE_ATOMIC_WRITE, 0);
        assertFalse(atomicWrite.servedBy(CX3));
        assertTrue(atomicWrite.servedBy(CX4));
    }

    @Test
    void perftestAsksForTheOperationsOdpBitAsRdmaCoresTestOdpDoes() {
        assertEquals(DeviceLookup.Needs.NONE, Perftest.needs(parsed(PerftestParameters.bw("write_bw", "t", IbvWrOpcode.RDMA_WRITE, new Object[0]))));
        assertEquals(DeviceLookup.Needs.NONE.rcOdp(false, OdpCaps.SUPPORT_SEND | OdpCaps.SUPPORT_WRITE),
                Perftest.needs(parsed(PerftestParameters.bw("write_bw", "t", IbvWrOpcode.RDMA_WRITE, new Object[] {"--odp"}))));
        assertEquals(DeviceLookup.Needs.NONE.rcOdp(false, OdpCaps.SUPPORT_SEND | OdpCaps.SUPPORT_READ),
                Perftest.needs(parsed(PerftestParameters.bw("read_bw", "t", IbvWrOpcode.RDMA_READ, new Object[] {"--odp"}))));
        assertEquals(DeviceLookup.Needs.NONE.rcOdp(false, OdpCaps.SUPPORT_SEND | OdpCaps.SUPPORT_RECV),
                Perftest.needs(parsed(PerftestParameters.bw("send_bw", "t", IbvWrOpcode.SEND, new Object[] {"--odp"}))));
        assertEquals(DeviceLookup.Needs.NONE.caps(IbvDeviceAttr.DEVICE_ATOMIC_WRITE, 0).rcOdp(false, OdpCaps.SUPPORT_SEND | OdpCaps.SUPPORT_ATOMIC_WRITE),
                Perftest.needs(parsed(PerftestParameters.atomic("t", new Object[] {"-A", "ATOMIC_WRITE", "--odp"}))));
        assertEquals(DeviceLookup.Needs.NONE.rcOdp(false, OdpCaps.SUPPORT_SEND | OdpCaps.SUPPORT_ATOMIC),
                Perftest.needs(parsed(PerftestParameters.atomic("t", new Object[] {"-A", "CMP_AND_SWAP", "--odp"}))));
        assertEquals(DeviceLookup.Needs.NONE.dmabuf(true),
                Perftest.needs(parsed(PerftestParameters.lat("write_lat", "t", IbvWrOpcode.RDMA_WRITE, new Object[] {"--dmabuf", "--mem", "nv_mem"}))));
    }

    private static PerftestParameters parsed(PerftestParameters p) {
        p.parse();
        return p;
    }
}
