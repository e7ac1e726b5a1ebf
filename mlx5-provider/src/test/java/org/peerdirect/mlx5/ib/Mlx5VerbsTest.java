package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvAh;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.rdma.RcConnect;

/**
 * mlx5_ib and the library's data path against two ConnectX-4 models on one fabric: WQEs written
 * by the library into its process's memory, fetched by the device by DMA, CQEs written back by
 * DMA, nothing else between them but MMIO and MSI-X. Every test ends with the IOMMU audit clean,
 * the firmware holding no page and every frame free.
 */
class Mlx5VerbsTest extends Mlx5Machine {


    @TempDir
    Path tmp;

    @BeforeEach
    void up() {
        // mlx5_0, mlx5_1: ConnectX-4 (InfiniBand); mlx5_2, mlx5_3: ConnectX-6 Dx (Ethernet, RoCE)
        startMachine(tmp, "verbs-app", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4,
                ConnectX4Device.DEVICE_CONNECTX6DX, ConnectX4Device.DEVICE_CONNECTX6DX);
    }

    @AfterEach
    void down() {
        assertEquals(List.of(), stopMachine(), "every DMA page freed, no page with the firmware, IOMMU clean, every frame free");
    }

    final class End {
        final IbvContext ctx;
        final IbvPd pd;
        final IbvCq cq;
        final IbvQp qp;
        final long buf;
        final IbvMr mr;
        final int lid;
        /** Port 1's GID (what a RoCE peer addresses). */
        final byte[] gid;

        /** The context's completion channel of {@link #cq}, or null. */
        final org.peerdirect.ib.core.verbs.IbvCompChannel channel;

        End(int dev, IbvQpType type) {
            this(dev, type, false);
        }

        End(int dev, IbvQpType type, boolean withChannel) {
            ctx = devs.get(dev).open(proc);
            pd = ctx.allocPd();
            channel = withChannel ? ctx.createCompChannel() : null;
            cq = ctx.createCq(256, channel);
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.qpType = type;
            a.maxSendWr = 64;
            a.maxRecvWr = 64;
            a.maxSendSge = 4;
            a.maxRecvSge = 4;
            a.maxInlineData = 256;
            qp = pd.createQp(a);
            buf = proc.mmap(1 << 20);
            proc.populate(buf, 1 << 20, true);
            mr = pd.regMr(buf, 1 << 20, RW);
            lid = ctx.queryPort(1).lid();
            gid = IbvGid.parse(ctx.queryGid(1, 0));
        }
    }

    static void connect(End me, End peer) {
        connect(me, peer.qp.qpNum(), peer.lid, null, 14, 7);
    }

    /** RESET → RTS towards QP {@code qpn} behind {@code lid}, or behind {@code gid} (a GRH path) when not null. */
    static void connect(End me, int qpn, int lid, byte[] gid, int timeout, int retries) {
        new RcConnect().access(RW).minRnrTimer(1).timeout(timeout, retries).gid(gid).connect(me.qp, lid, qpn);
    }

    static IbvWc one(IbvCq cq) {
        IbvWc[] wc = {new IbvWc()};
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            int k = cq.poll(1, wc);
            if (k < 0) {
                throw new AssertionError("CQ in error");
            }
            if (k == 1) {
                return wc[0];
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no completion within 10 s");
            }
            Thread.onSpinWait();
        }
    }

    static IbvSendWr wr(IbvWrOpcode op, long addr, int len, int lkey, long id) {
        IbvSendWr w = new IbvSendWr().sge(addr, len, lkey);
        w.opcode = op;
        w.wrId = id;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        return w;
    }


    /**
     * {@code mlx5_arm_cq} carries the consumer index: a CQE that lands between the last poll and
     * the arm is an event at once (what {@code mlx5e_napi_poll}'s arm-and-leave relies on); with
     * every CQE polled, the arm waits for the next one.
     */
    @Test
    void aCqeThatLandedBeforeTheArmIsAnEventAtOnce() throws Exception {
        End a = new End(0, IbvQpType.RC);
        End b = new End(1, IbvQpType.RC, true);
        connect(a, b);
        connect(b, a);
        b.qp.postRecv(new IbvRecvWr().sge(b.buf, 64, b.mr.lkey()));
        a.qp.postSend(wr(IbvWrOpcode.SEND, a.buf, 64, a.mr.lkey(), 1));
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status, "acknowledged: the receive CQE is written");
        b.cq.reqNotify(false); // nothing polled since the CQE landed
        assertEquals(b.cq, b.channel.getCqEvent(java.time.Duration.ofSeconds(10)), "the waiting CQE fired the arm");
        b.channel.ackCqEvents(b.cq, 1);
        assertEquals(IbvWcStatus.SUCCESS, one(b.cq).status);
        b.cq.reqNotify(false);
        assertNull(b.channel.getCqEvent(java.time.Duration.ofMillis(20)), "everything polled: no event");
        b.qp.postRecv(new IbvRecvWr().sge(b.buf, 64, b.mr.lkey()));
        a.qp.postSend(wr(IbvWrOpcode.SEND, a.buf, 64, a.mr.lkey(), 2));
        assertEquals(b.cq, b.channel.getCqEvent(java.time.Duration.ofSeconds(10)), "the next CQE fires the arm");
        b.channel.ackCqEvents(b.cq, 1);
        assertEquals(IbvWcStatus.SUCCESS, one(b.cq).status);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
    }

    @Test
    void pingpongValidatesOnMlx5() throws Exception {
        String out = tools().pingpong("-d", "mlx5_0", "-s", "4096", "-n", "200", "-c");
        assertTrue(out.contains("no mismatch"), out);
    }

    /**
     * UD over RoCE (ConnectX-6 Dx): an address handle needs a GRH with the destination GID (a
     * LID-only AH is EINVAL, as rdma_check_ah_attr; a source GID index outside the table or a hop
     * limit above 255 too); libmlx5 writes the GRH fields into the WQE's address vector and the
     * datagram arrives with its GRH flag and 40 bytes of GRH before the payload. The same AH form
     * with a GRH works on InfiniBand, where the LID still routes.
     */
    /**
     * The RoCE port reports GID 1 (its IPv6 link-local address) but builds IPv4 frames from GID 0
     * only: an RC path from source GID 1 is refused at RTR (BAD_PARAM), instead of sending from
     * another GID than the QP asked for; GID 0 connects.
     */
    @Test
    void aRocePathFromAGidThePortCannotSendFromIsRefused() {
        End a = new End(2, IbvQpType.RC);
        End b = new End(3, IbvQpType.RC);
        KernelException e = assertThrows(KernelException.class,
                () -> new RcConnect().access(RW).gid(b.gid, 1).connect(a.qp, 0, b.qp.qpNum()));
        assertEquals(KernelException.Errno.EINVAL, e.errno(), e.getMessage());
        // the driver reports what mlx5_cmd_check logs: the command, its status and syndrome (the firmware's reason is its own)
        assertTrue(e.getMessage().contains("INIT2RTR_QP") && e.getMessage().contains("bad parameter"), e.getMessage());
        a.qp.modify(reset(), IbvQpAttr.STATE);
        connect(a, b.qp.qpNum(), 0, b.gid, 14, 7);
        connect(b, a.qp.qpNum(), 0, a.gid, 14, 7);
    }

    @Test
    void udOverRoceTakesAnAddressHandleWithAGidAndDeliversWithAGrh() {
        End u = new End(2, IbvQpType.UD);
        End v = new End(3, IbvQpType.UD);
        org.peerdirect.rdma.RcConnect.udToRts(u.qp, 1, 0x11111111);
        org.peerdirect.rdma.RcConnect.udToRts(v.qp, 1, 0x11111111);
        KernelException lidOnly = assertThrows(KernelException.class, () -> u.pd.createAh(1, 1));
        assertEquals(KernelException.Errno.EINVAL, lidOnly.errno());
        assertTrue(lidOnly.getMessage().contains("Ethernet (RoCE)"), lidOnly.getMessage());
        org.peerdirect.ib.core.verbs.IbvAhAttr bad = org.peerdirect.ib.core.verbs.IbvAhAttr.gid(v.gid, 99, 1);
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> u.pd.createAh(bad)).errno());
        org.peerdirect.ib.core.verbs.IbvAhAttr far = org.peerdirect.ib.core.verbs.IbvAhAttr.gid(v.gid, 0, 1);
        far.hopLimit = 300;
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> u.pd.createAh(far)).errno());
        IbvAh ah = u.pd.createAh(org.peerdirect.ib.core.verbs.IbvAhAttr.gid(v.gid, 0, 1));
        assertTrue(ah.isGlobal());
        udRoundTrip(u, v, ah, 1000, 5);

        // InfiniBand with a GRH: the LID routes, the GRH rides along
        End x = new End(0, IbvQpType.UD);
        End y = new End(1, IbvQpType.UD);
        org.peerdirect.rdma.RcConnect.udToRts(x.qp, 1, 0x11111111);
        org.peerdirect.rdma.RcConnect.udToRts(y.qp, 1, 0x11111111);
        org.peerdirect.ib.core.verbs.IbvAhAttr ib = org.peerdirect.ib.core.verbs.IbvAhAttr.gid(y.gid, 0, 1);
        ib.dlid = y.lid;
        IbvAh ibAh = x.pd.createAh(ib);
        udRoundTrip(x, y, ibAh, 2000, 6);
        // InfiniBand by LID alone: no GRH on the wire, none delivered (the 40 bytes stay reserved)
        IbvAh lidAh = x.pd.createAh(y.lid, 1);
        udRoundTrip(x, y, lidAh, 300, 7);
        ah.destroy();
        ibAh.destroy();
        lidAh.destroy();
    }

    /**
     * rdma:ud_pingpong (ibv_ud_pingpong): validated over RoCE between the two ConnectX-6 Dx by GID
     * (-g 0) and over InfiniBand by LID; on RoCE without -g the core refuses the LID-only address
     * handle, and the tool ends with that error, its resources released (stopMachine checks).
     */
    @Test
    void udPingpongRunsOverRoceByGidAndOverInfinibandByLid() {
        String roce = tools().ud_pingpong("-d", "mlx5_2", "-g", "0", "-c", "-n", "50", "-s", "2048");
        assertTrue(roce.contains("validated 100 received buffers; 100 datagrams arrived with a GRH"), roce);
        assertTrue(roce.contains("GID 0000:0000:0000:0000:0000:ffff:0a00:"), "addressed by the RoCE GIDs: " + roce);
        String ib = tools().ud_pingpong("-d", "mlx5_0", "-c", "-n", "50");
        assertTrue(ib.contains("validated 100 received buffers; 0 datagrams arrived with a GRH"), "LID-only on InfiniBand: " + ib);
        String ibGid = tools().ud_pingpong("-d", "mlx5_0", "-g", "0", "-c", "-n", "50");
        assertTrue(ibGid.contains("validated 100 received buffers; 100 datagrams arrived with a GRH"), "with -g on InfiniBand: " + ibGid);
        KernelException e = assertThrows(KernelException.class, () -> tools().ud_pingpong("-d", "mlx5_2", "-n", "5"));
        assertEquals(KernelException.Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("Ethernet (RoCE)"), e.getMessage());
    }

    /**
     * One datagram of {@code len} bytes from u to v through {@code ah}: sent, received after the
     * 40 bytes reserved for a GRH; the GRH is there (and IBV_WC_GRH set) exactly when the AH is
     * global, otherwise those 40 bytes are left as they were.
     */
    private void udRoundTrip(End u, End v, IbvAh ah, int len, int seed) {
        byte[] marker = fill(v.buf, 40, seed + 100);
        org.peerdirect.ib.core.verbs.IbvRecvWr r = new org.peerdirect.ib.core.verbs.IbvRecvWr().sge(v.buf, 40 + len, v.mr.lkey());
        r.wrId = 77;
        v.qp.postRecv(r);
        byte[] data = fill(u.buf + 8192, len, seed);
        IbvSendWr w = wr(IbvWrOpcode.SEND, u.buf + 8192, len, u.mr.lkey(), 1);
        w.ah = ah;
        w.remoteQpn = v.qp.qpNum();
        w.remoteQkey = 0x11111111;
        u.qp.postSend(w);
        IbvWc s = one(u.cq);
        assertEquals(IbvWcStatus.SUCCESS, s.status, s.toString());
        IbvWc c = one(v.cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
        assertEquals(77, c.wrId);
        assertEquals(40 + len, c.byteLen, "the GRH area and the payload");
        assertEquals(ah.isGlobal(), (c.wcFlags & IbvWc.WC_GRH) != 0, "IBV_WC_GRH exactly with a global AH");
        if (ah.isGlobal()) {
            assertEquals(0x60, read(v.buf, 1)[0] & 0xF0, "IP version 6 in the GRH");
        } else {
            assertArrayEquals(marker, read(v.buf, 40), "no GRH arrived: the area is untouched");
        }
        assertEquals(u.qp.qpNum(), c.srcQp);
        assertArrayEquals(data, read(v.buf + 40, len));
    }

    /**
     * RoCE on the ConnectX-6 Dx: no LID, a GID derived from the port's IPv4 address, and a QP
     * connected by GID only; a LID-only path is refused by the core, and an Ethernet port cannot
     * reach an InfiniBand port even at the endpoint its GID names (two networks).
     */
    @Test
    void roceConnectsByGidOnlyAndTheNetworksStayApart() throws Exception {
        End a = new End(2, IbvQpType.RC);
        End b = new End(3, IbvQpType.RC);
        IbvPortAttr p = a.ctx.queryPort(1);
        assertEquals(IbvPortAttr.LINK_LAYER_ETHERNET, p.linkLayer());
        assertEquals(0, p.lid(), "an Ethernet port has no LID");
        assertTrue(a.ctx.queryGid(1, 0).startsWith("0000:0000:0000:0000:0000:ffff:0a00:"), "an IPv4-mapped RoCE v2 GID: " + a.ctx.queryGid(1, 0));
        KernelException e = assertThrows(KernelException.class, () -> connect(a, b));
        assertEquals(KernelException.Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("Ethernet (RoCE)"), e.getMessage());
        a.qp.modify(reset(), IbvQpAttr.STATE);
        connect(a, b.qp.qpNum(), 0, b.gid, 14, 7);
        connect(b, a.qp.qpNum(), 0, a.gid, 14, 7);
        writeLands(a, b, 8192, 3);

        // an InfiniBand QP connected to an Ethernet QP's endpoint (the number behind its GID), so
        // that only the link layers keep the Ethernet QP's writes from landing
        End ib = new End(0, IbvQpType.RC);
        End eth = new End(2, IbvQpType.RC);
        connect(ib, eth.qp.qpNum(), (eth.gid[14] & 0xff) << 8 | eth.gid[15] & 0xff, null, 14, 7);
        byte[] atIbEndpoint = new byte[16];
        atIbEndpoint[10] = (byte) 0xff;
        atIbEndpoint[11] = (byte) 0xff;
        atIbEndpoint[12] = 10;
        atIbEndpoint[14] = (byte) (ib.lid >>> 8);
        atIbEndpoint[15] = (byte) ib.lid;
        connect(eth, ib.qp.qpNum(), 0, atIbEndpoint, 8, 1); // 1 ms ACK timeout, one retry
        fill(eth.buf, 64, 9);
        byte[] before = read(ib.buf, 64);
        IbvSendWr x = wr(IbvWrOpcode.RDMA_WRITE, eth.buf, 64, eth.mr.lkey(), 2);
        x.remoteAddr = ib.buf;
        x.rkey = ib.mr.rkey();
        eth.qp.postSend(x);
        assertEquals(IbvWcStatus.RETRY_EXC_ERR, one(eth.cq).status, "the packet never reached the InfiniBand port");
        assertArrayEquals(before, read(ib.buf, 64), "nothing written across the networks");

        String out = tools().pingpong("-d", "mlx5_2", "-s", "4096", "-n", "100", "-c");
        assertTrue(out.contains("no mismatch") && out.contains("GID 0000:0000:0000:0000:0000:ffff:0a00:"), out);
    }

    /**
     * A surprise hot-unplug of the sending device while it carries RDMA WRITEs: the model powers
     * down, the driver's removal (mlx5_ib first, then the core, as {@code Mlx5Driver} does from
     * its removal listener) disassociates the users; the writer ends in an error, never hangs,
     * later verbs fail with EIO, and nothing is left mapped or pinned (checked by down()).
     */
    @Test
    void aHotUnplugUnderTrafficEndsInErrorsAndLeavesNothingBehind() throws Exception {
        End a = new End(0, IbvQpType.RC);
        End b = new End(1, IbvQpType.RC);
        connect(a, b);
        connect(b, a);
        fns.get(0).addRemovalListener(() -> { // what Mlx5Driver.remove and Mlx5IbDriver.unregister do
            core.unregister(ibs.get(0));
            assertTrue(!cores.get(0).isUp(), "a removed device is not up");
            ibs.get(0).internalError();
            ibs.get(0).close();
            cores.get(0).unload();
        });
        java.util.concurrent.atomic.AtomicLong ok = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicReference<Object> end = new java.util.concurrent.atomic.AtomicReference<>();
        Thread writer = Thread.ofPlatform().name("writer").start(() -> {
            IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 4096, a.mr.lkey(), 0);
            w.remoteAddr = b.buf;
            w.rkey = b.mr.rkey();
            IbvWc[] wc = {new IbvWc()};
            try {
                while (true) {
                    a.qp.postSend(w);
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                    int n;
                    while ((n = a.cq.poll(1, wc)) == 0) {
                        if (System.nanoTime() > deadline) {
                            end.set("no completion within 20 s");
                            return;
                        }
                        Thread.onSpinWait();
                    }
                    if (n < 0 || wc[0].status != IbvWcStatus.SUCCESS) {
                        end.set(n < 0 ? "CQ error" : wc[0].status);
                        return;
                    }
                    ok.incrementAndGet();
                }
            } catch (KernelException e) {
                end.set(e.errno());
            }
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (ok.get() < 100) {
            assertTrue(System.nanoTime() < deadline && writer.isAlive(), "traffic flowing: " + end.get());
            Thread.onSpinWait();
        }
        unplugged.add(0);
        fns.get(0).remove();
        writer.join(30_000);
        assertTrue(!writer.isAlive(), "the writer ended, no hang");
        Object why = end.get();
        assertTrue(why == IbvWcStatus.WR_FLUSH_ERR || why == KernelException.Errno.EIO || why == IbvWcStatus.RETRY_EXC_ERR,
                "the traffic ended in an error: " + why);
        KernelException e = assertThrows(KernelException.class, () -> a.qp.postSend(wr(IbvWrOpcode.RDMA_WRITE, a.buf, 8, a.mr.lkey(), 1)));
        assertEquals(KernelException.Errno.EIO, e.errno());
        assertEquals(0, cores.get(0).dmaPagesLive(), "the driver freed its DMA pages of the gone device");
        a.ctx.close();
        b.ctx.close();
    }

    static IbvQpAttr reset() {
        IbvQpAttr r = new IbvQpAttr();
        r.qpState = IbvQpState.RESET;
        return r;
    }

    @Test
    void portAndAttributesComeFromTheFirmware() {
        IbvContext c = devs.get(0).open(proc);
        IbvPortAttr p = c.queryPort(1);
        assertEquals(IbvPortAttr.PORT_ACTIVE, p.state());
        assertEquals(IbvPortAttr.LINK_LAYER_INFINIBAND, p.linkLayer());
        assertTrue(p.lid() > 0, "an InfiniBand port has a LID: " + p);
        assertEquals(1 << 18, c.queryDevice().maxQp(), "log_max_qp as SET_HCA_CAP left it");
        assertEquals(4115, c.queryDevice().vendorPartId());
        assertTrue(c.queryGid(1, 0).startsWith("fe80:0000:0000:0000:"), c.queryGid(1, 0));
        c.close();
    }

    @Test
    void rdmaWriteSendAndReadThroughDescriptorsInMemory() {
        End a = new End(0, IbvQpType.RC);
        End b = new End(1, IbvQpType.RC);
        connect(a, b);
        connect(b, a);
        byte[] data = fill(a.buf, 65536, 1);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 65536, a.mr.lkey(), 7);
        w.remoteAddr = b.buf + 4096;
        w.rkey = b.mr.rkey();
        a.qp.postSend(w);
        IbvWc c = one(a.cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
        assertEquals(IbvWcOpcode.RDMA_WRITE, c.opcode);
        assertEquals(7, c.wrId);
        assertArrayEquals(data, read(b.buf + 4096, 65536));

        // SEND with immediate into a posted receive; then many round trips to wrap both rings
        for (int i = 0; i < 300; i++) {
            IbvRecvWr r = new IbvRecvWr().sge(b.buf + 200_000, 1000, b.mr.lkey());
            r.wrId = 1000 + i;
            b.qp.postRecv(r);
            byte[] x = fill(a.buf + 100_000, 100 + i, i);
            IbvSendWr s = wr(IbvWrOpcode.SEND_WITH_IMM, a.buf + 100_000, 100 + i, a.mr.lkey(), 2000 + i);
            s.immData = 0x1234 + i;
            a.qp.postSend(s);
            IbvWc sc = one(a.cq);
            assertEquals(IbvWcStatus.SUCCESS, sc.status, sc.toString());
            assertEquals(2000 + i, sc.wrId);
            IbvWc rc = one(b.cq);
            assertEquals(IbvWcStatus.SUCCESS, rc.status, rc.toString());
            assertEquals(IbvWcOpcode.RECV, rc.opcode);
            assertEquals(1000 + i, rc.wrId);
            assertEquals(100 + i, rc.byteLen);
            assertEquals(0x1234 + i, rc.immData);
            assertEquals(a.qp.qpNum(), rc.srcQp);
            assertArrayEquals(x, read(b.buf + 200_000, 100 + i));
        }

        // inline: the bytes travel in the WQE (across basic blocks)
        IbvRecvWr r = new IbvRecvWr().sge(b.buf + 300_000, 1000, b.mr.lkey());
        b.qp.postRecv(r);
        byte[] z = fill(a.buf + 9000, 200, 4);
        IbvSendWr in = wr(IbvWrOpcode.SEND, a.buf + 9000, 200, 0xdead, 9);
        in.sendFlags |= IbvSendWr.SEND_INLINE;
        a.qp.postSend(in);
        fill(a.buf + 9000, 200, 99);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertEquals(200, one(b.cq).byteLen);
        assertArrayEquals(z, read(b.buf + 300_000, 200));

        // RDMA READ and fetch-and-add
        byte[] remote = fill(b.buf + 12288, 4096, 5);
        IbvSendWr rd = wr(IbvWrOpcode.RDMA_READ, a.buf + 8192 * 4, 4096, a.mr.lkey(), 11);
        rd.remoteAddr = b.buf + 12288;
        rd.rkey = b.mr.rkey();
        a.qp.postSend(rd);
        assertEquals(IbvWcOpcode.RDMA_READ, one(a.cq).opcode);
        assertArrayEquals(remote, read(a.buf + 8192 * 4, 4096));
        proc.writeLong(b.buf + 64, 5);
        IbvSendWr fa = wr(IbvWrOpcode.ATOMIC_FETCH_AND_ADD, a.buf + 128, 8, a.mr.lkey(), 12);
        fa.remoteAddr = b.buf + 64;
        fa.rkey = b.mr.rkey();
        fa.compareAdd = 10;
        a.qp.postSend(fa);
        assertEquals(IbvWcOpcode.FETCH_ADD, one(a.cq).opcode);
        assertEquals(5, proc.readLong(a.buf + 128));
        assertEquals(15, proc.readLong(b.buf + 64));
    }

    /**
     * BlueFlame: a single request that fits the 256-byte buffer goes whole into the BlueFlame
     * register and the device takes it from there (not by DMA, and not reading the doorbell
     * record); a list, or a WQE longer than the buffer, rings the doorbell and the device fetches
     * from memory. A burst naming a WQE the device already has is a plain doorbell; one carrying
     * a WQE the queue's memory never held is executed as carried, a malformed one completes in
     * error. {@code MLX5_SHUT_UP_BF} turns BlueFlame off for the QPs created after it.
     */
    @Test
    void aSinglePostGoesWholeByBlueFlameAndAListByTheDoorbellRecord() {
        End a = new End(0, IbvQpType.RC);
        End b = new End(1, IbvQpType.RC);
        connect(a, b);
        connect(b, a);
        ConnectX4Device dev = models.get(0);
        long fetched = dev.wqesFetched();
        long bf = dev.wqesBlueFlame();

        writeLands(a, b, 64, 1);
        byte[] one = read(a.buf, 64);
        assertEquals(fetched + 1, dev.wqesFetched(), "one WQE");
        assertEquals(bf + 1, dev.wqesBlueFlame(), "a single post goes by BlueFlame");

        // a list of three: the doorbell, the WQEs read from memory
        IbvSendWr l1 = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey(), 2);
        IbvSendWr l2 = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey(), 3);
        IbvSendWr l3 = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey(), 4);
        for (IbvSendWr x : List.of(l1, l2, l3)) {
            x.remoteAddr = b.buf + 4096 * x.wrId;
            x.rkey = b.mr.rkey();
        }
        l1.next = l2;
        l2.next = l3;
        a.qp.postSend(l1);
        for (int i = 2; i <= 4; i++) {
            assertEquals(i, one(a.cq).wrId);
            assertArrayEquals(one, read(b.buf + 4096L * i, 64));
        }
        assertEquals(fetched + 4, dev.wqesFetched());
        assertEquals(bf + 1, dev.wqesBlueFlame(), "a list rings the doorbell");

        // inline: 200 bytes make a 4-block SEND (fits), 240 bytes a 5-block WRITE (does not)
        b.qp.postRecv(new IbvRecvWr().sge(b.buf + 65536, 4096, b.mr.lkey()));
        byte[] small = fill(a.buf + 8192, 240, 7);
        IbvSendWr s = wr(IbvWrOpcode.SEND, a.buf + 8192, 200, 0, 5);
        s.sendFlags |= IbvSendWr.SEND_INLINE;
        a.qp.postSend(s);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertEquals(200, one(b.cq).byteLen);
        assertEquals(bf + 2, dev.wqesBlueFlame(), "a 4-block inline SEND goes by BlueFlame");
        IbvSendWr big = wr(IbvWrOpcode.RDMA_WRITE, a.buf + 8192, 240, 0, 6);
        big.sendFlags |= IbvSendWr.SEND_INLINE;
        big.remoteAddr = b.buf + 131072;
        big.rkey = b.mr.rkey();
        a.qp.postSend(big);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertArrayEquals(small, read(b.buf + 131072, 240));
        assertEquals(fetched + 6, dev.wqesFetched());
        assertEquals(bf + 2, dev.wqesBlueFlame(), "a 5-block WQE does not fit the 256-byte buffer");

        // 4-block WQEs around the 512-block ring: some cross a page of the queue, one wraps its end;
        // those go through the library's staging buffer, the rest straight from the queue
        for (int i = 0; i < 140; i++) {
            b.qp.postRecv(new IbvRecvWr().sge(b.buf + 65536, 4096, b.mr.lkey()));
            byte[] x = fill(a.buf + 8192, 200, 20 + i);
            IbvSendWr r = wr(IbvWrOpcode.SEND, a.buf + 8192, 200, 0, 100 + i);
            r.sendFlags |= IbvSendWr.SEND_INLINE;
            a.qp.postSend(r);
            assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
            assertEquals(200, one(b.cq).byteLen);
            assertArrayEquals(x, read(b.buf + 65536, 200), "inline SEND " + i);
        }
        assertEquals(bf + 142, dev.wqesBlueFlame(), "every one by BlueFlame");
        bf += 140;
        fetched += 140;

        // raw bursts at the QP's BlueFlame register: a WQE the device already fetched is only a doorbell
        int qpn = a.qp.qpNum();
        MemorySegment q = queryQp(0, qpn);
        int uar = org.peerdirect.hca.cx4.ifc.Qp.QPC_UAR_PAGE.get(q, org.peerdirect.hca.cx4.ifc.Qp.QUERY_OUT_QPC);
        int head = org.peerdirect.hca.cx4.ifc.Qp.QPC_HW_SQ_WQEBB_COUNTER.get(q, org.peerdirect.hca.cx4.ifc.Qp.QUERY_OUT_QPC);
        long bfReg = ((long) uar << 12) + org.peerdirect.hca.cx4.ifc.Qp.UAR_BF_OFFSET;
        byte[] fresh = fill(a.buf + 12288, 64, 9);
        fns.get(0).iowrite64Copy(0, bfReg, writeWqe(head - 1, qpn, a.buf + 12288, a.mr.lkey(), b.buf + 196608, b.mr.rkey()), 0, 64);
        assertEquals(fetched + 6, dev.wqesFetched(), "a burst behind the device's counter fetches nothing new");
        IbvWc[] none = {new IbvWc()};
        assertEquals(0, a.cq.poll(1, none), "no completion from a stale burst");
        // a WQE only the burst holds (the queue's memory and doorbell record never saw it): executed as carried
        fns.get(0).iowrite64Copy(0, bfReg, writeWqe(head, qpn, a.buf + 12288, a.mr.lkey(), b.buf + 196608, b.mr.rkey()), 0, 64);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertArrayEquals(fresh, read(b.buf + 196608, 64), "the burst's WRITE landed");
        assertEquals(bf + 3, dev.wqesBlueFlame());
        // a malformed WQE in a burst (opcode 0xff) completes in error as one fetched from memory does
        MemorySegment bad = writeWqe(head + 1, qpn, a.buf + 12288, a.mr.lkey(), b.buf + 196608, b.mr.rkey());
        bad.set(java.lang.foreign.ValueLayout.JAVA_BYTE, org.peerdirect.hca.cx4.ifc.Qp.CTRL_OPMOD_IDX_OPCODE + 3, (byte) 0xff);
        fns.get(0).iowrite64Copy(0, bfReg + 256, bad, 0, 64);
        assertEquals(IbvWcStatus.LOC_QP_OP_ERR, one(a.cq).status, "a malformed WQE from a burst");
        assertEquals(bf + 4, dev.wqesBlueFlame());

        // MLX5_SHUT_UP_BF: a QP created under it rings the doorbell for a single post too
        System.setProperty(org.peerdirect.mlx5.lib.Mlx5Qp.SHUT_UP_BF, "1");
        End c;
        try {
            c = new End(0, IbvQpType.RC);
        } finally {
            System.clearProperty(org.peerdirect.mlx5.lib.Mlx5Qp.SHUT_UP_BF);
        }
        End d = new End(1, IbvQpType.RC);
        connect(c, d);
        connect(d, c);
        fetched = dev.wqesFetched(); // the registrations above ran UMR WQEs on mlx5_ib's own QP
        writeLands(c, d, 64, 11);
        assertEquals(fetched + 1, dev.wqesFetched());
        assertEquals(bf + 4, dev.wqesBlueFlame(), "MLX5_SHUT_UP_BF: no BlueFlame");

        // each queue counts its own WQEs and CQEs; a destroyed one's counts stay in the device's totals
        long total = dev.wqesFetched();
        String cqes = dev.describe().replaceAll(".*CQEs written (\\d+).*", "$1");
        a.qp.destroy();
        c.qp.destroy();
        a.cq.destroy();
        assertEquals(total, dev.wqesFetched(), "a destroyed QP's WQEs still counted");
        assertEquals(bf + 4, dev.wqesBlueFlame(), "a destroyed QP's BlueFlame WQEs still counted");
        assertEquals(cqes, dev.describe().replaceAll(".*CQEs written (\\d+).*", "$1"), "a destroyed CQ's CQEs still counted");
    }

    /** A signaled one-block RDMA WRITE WQE at basic block {@code idx}, as libmlx5 lays it out (ctrl, raddr, data). */
    static MemorySegment writeWqe(int idx, int qpn, long laddr, int lkey, long raddr, int rkey) {
        MemorySegment m = MemorySegment.ofArray(new byte[64]);
        m.set(BE32, org.peerdirect.hca.cx4.ifc.Qp.CTRL_OPMOD_IDX_OPCODE, (idx & 0xffff) << 8 | org.peerdirect.hca.cx4.ifc.Wqe.OP_RDMA_WRITE);
        m.set(BE32, org.peerdirect.hca.cx4.ifc.Qp.CTRL_QPN_DS, qpn << 8 | 3);
        m.set(java.lang.foreign.ValueLayout.JAVA_BYTE, org.peerdirect.hca.cx4.ifc.Qp.CTRL_FM_CE_SE, (byte) org.peerdirect.hca.cx4.ifc.Qp.CTRL_CQ_UPDATE);
        m.set(BE64, 16 + org.peerdirect.hca.cx4.ifc.Qp.RADDR_VA, raddr);
        m.set(BE32, 16 + org.peerdirect.hca.cx4.ifc.Qp.RADDR_RKEY, rkey);
        m.set(BE32, 32 + org.peerdirect.hca.cx4.ifc.Qp.DATA_BYTE_COUNT, 64);
        m.set(BE32, 32 + org.peerdirect.hca.cx4.ifc.Qp.DATA_LKEY, lkey);
        m.set(BE64, 32 + org.peerdirect.hca.cx4.ifc.Qp.DATA_ADDR, laddr);
        return m;
    }


    @Test
    void aWrongRkeyIsARemoteAccessErrorAndTheQpGoesToError() {
        End a = new End(0, IbvQpType.RC);
        End b = new End(1, IbvQpType.RC);
        connect(a, b);
        connect(b, a);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey(), 3);
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey() ^ 0x55; // another key byte: no such mkey
        a.qp.postSend(w);
        IbvWc c = one(a.cq);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, c.status, c.toString());
        assertEquals(3, c.wrId);
        assertEquals(IbvQpState.ERR, a.qp.state());
    }

    @Test
    void postingBeforeRtsIsRefusedWithItsReason() {
        End a = new End(0, IbvQpType.RC);
        IbvSendWr w = wr(IbvWrOpcode.SEND, a.buf, 64, a.mr.lkey(), 1);
        KernelException p = assertThrows(KernelException.class, () -> a.qp.postSend(w), "posting before RTS is refused");
        assertTrue(p.getMessage().contains("needs RTS"), p.getMessage());
    }

    /**
     * An SRQ in the process's memory shared by two RC QPs: 300 SENDs from two senders land in
     * receive WQEs the device takes down the SRQ's linked list; each completion names the WQE,
     * the library puts it back at the list's tail and reposts, so the list is walked many times
     * over in an order the completions choose. Every payload arrives whole, every wr_id comes
     * back exactly once per post, and a full SRQ or an SRQ in use is refused with its reason.
     */
    @Test
    void anSrqInMemorySharedByTwoQpsCarriesEverySend() {
        End s1 = new End(0, IbvQpType.RC);
        End s2 = new End(0, IbvQpType.RC);
        IbvContext rctx = devs.get(1).open(proc);
        IbvPd rpd = rctx.allocPd();
        IbvCq rcq = rctx.createCq(512, null);
        org.peerdirect.ib.core.verbs.IbvSrq srq = rpd.createSrq(15, 1); // 16 WQEs in the list, 15 usable
        long rbuf = proc.mmap(1 << 20);
        proc.populate(rbuf, 1 << 20, true);
        IbvMr rmr = rpd.regMr(rbuf, 1 << 20, RW);
        IbvQp[] r = new IbvQp[2];
        for (int i = 0; i < 2; i++) {
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = rcq;
            a.recvCq = rcq;
            a.qpType = IbvQpType.RC;
            a.maxSendWr = 16;
            a.maxSendSge = 1;
            a.srq = srq;
            r[i] = rpd.createQp(a);
        }
        int rlid = rctx.queryPort(1).lid();
        End[] senders = {s1, s2};
        for (int i = 0; i < 2; i++) {
            connect(senders[i], r[i].qpNum(), rlid, null, 14, 7);
            IbvQp q = r[i];
            End peer = senders[i];
            IbvQpAttr x = new IbvQpAttr();
            x.qpState = IbvQpState.INIT;
            x.portNum = 1;
            x.qpAccessFlags = RW;
            q.modify(x, IbvQpAttr.STATE | IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT | IbvQpAttr.ACCESS_FLAGS);
            x = new IbvQpAttr();
            x.qpState = IbvQpState.RTR;
            x.pathMtu = 5;
            x.destQpNum = peer.qp.qpNum();
            x.dlid = peer.lid;
            x.minRnrTimer = 1;
            x.maxDestRdAtomic = 1;
            q.modify(x, IbvQpAttr.STATE | IbvQpAttr.AV | IbvQpAttr.PATH_MTU | IbvQpAttr.DEST_QPN | IbvQpAttr.RQ_PSN
                    | IbvQpAttr.MAX_DEST_RD_ATOMIC | IbvQpAttr.MIN_RNR_TIMER);
        }
        final int slot = 4096;
        IbvRecvWr rw = new IbvRecvWr();
        for (int i = 0; i < 15; i++) {
            rw.wrId = 1000 + i;
            rw.sge(rbuf + (long) i * slot, slot, rmr.lkey());
            srq.postRecv(rw);
        }
        rw.wrId = 9999;
        rw.sge(rbuf, slot, rmr.lkey());
        KernelException full = assertThrows(KernelException.class, () -> srq.postRecv(rw), "the 16th WQE would close the list");
        assertEquals(KernelException.Errno.ENOMEM, full.errno());
        assertTrue(full.getMessage().contains("full"), full.getMessage());

        java.util.Map<Long, Integer> seen = new java.util.HashMap<>();
        for (int n = 0; n < 300; n++) {
            End from = senders[n & 1];
            byte[] payload = fill(from.buf, 256 + n, n);
            IbvSendWr w = wr(IbvWrOpcode.SEND, from.buf, 256 + n, from.mr.lkey(), n);
            from.qp.postSend(w);
            IbvWc sc = one(from.cq);
            assertEquals(IbvWcStatus.SUCCESS, sc.status, sc.toString());
            IbvWc rc = one(rcq);
            assertEquals(IbvWcStatus.SUCCESS, rc.status, rc.toString());
            assertEquals(IbvWcOpcode.RECV, rc.opcode);
            assertEquals(256 + n, rc.byteLen);
            assertEquals(r[n & 1].qpNum(), rc.qpNum, "the completion names the QP the SEND came in on");
            long id = rc.wrId;
            assertTrue(id >= 1000 && id < 1015, "a wr_id that was posted: " + id);
            int index = (int) (id - 1000);
            assertArrayEquals(payload, read(rbuf + (long) index * slot, 256 + n), "message " + n + " in the buffer of WQE " + index);
            seen.merge(id, 1, Integer::sum);
            rw.wrId = id; // repost into the same buffer
            rw.sge(rbuf + (long) index * slot, slot, rmr.lkey());
            srq.postRecv(rw);
        }
        assertEquals(15, seen.size(), "the device walked the whole list: every one of the 15 WQEs carried messages: " + seen);
        KernelException busy = assertThrows(KernelException.class, srq::destroy, "an SRQ in use cannot go");
        assertEquals(KernelException.Errno.EBUSY, busy.errno());
        r[0].destroy();
        r[1].destroy();
        srq.destroy();
        rmr.dereg();
        rcq.destroy();
        rpd.dealloc();
        rctx.close();
    }

    /** Commands of {@code opcode} in device {@code dev}'s log after sequence number {@code after}. */
    long commands(int dev, int opcode, long after) {
        return cores.get(dev).cmdLog().entries().stream().filter(e -> e.seq() > after && e.opcode() == opcode).count();
    }

    long lastSeq(int dev) {
        List<org.peerdirect.mlx5.core.CmdLog.Entry> es = cores.get(dev).cmdLog().entries();
        return es.isEmpty() ? -1 : es.get(es.size() - 1).seq();
    }

    /** One RDMA WRITE of {@code n} bytes from a to b's {@code rkey} at b.buf: its completion status. */
    IbvWcStatus write(End a, End b, int rkey, int n, int seed) {
        fill(a.buf, n, seed);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, n, a.mr.lkey(), seed);
        w.remoteAddr = b.buf;
        w.rkey = rkey;
        a.qp.postSend(w);
        return one(a.cq).status;
    }

    /** {@link #write} through b's own MR: it succeeds and the {@code n} bytes at a.buf are the ones at b.buf. */
    void writeLands(End a, End b, int n, int seed) {
        assertEquals(IbvWcStatus.SUCCESS, write(a, b, b.mr.rkey(), n, seed));
        assertArrayEquals(read(a.buf, n), read(b.buf, n));
    }

    /**
     * The mkey cache: a deregistered MR's mkey is revoked by UMR and kept; the next registration
     * of the same size takes it from the cache and enables it by UMR (no CREATE_MKEY), with the
     * kernel's key (the same variant), new translations and rights; the data path uses it.
     */
    @Test
    void deregKeepsTheMkeyInTheCacheAndTheNextRegistrationEnablesItByUmr() {
        End a = new End(0, IbvQpType.RC);
        End b = new End(1, IbvQpType.RC);
        connect(a, b);
        connect(b, a);
        int ndescs = 256; // 1 MiB of 4 KiB pages
        long[] c0 = ibs.get(1).mkeyCache().counters(ndescs);
        assertEquals(1, c0[1], "the first registration of 256 pages was a miss (created by command): " + ibs.get(1).mkeyCacheSummary(true));
        assertEquals(1, c0[3], "in use");
        assertEquals(IbvWcStatus.SUCCESS, write(a, b, b.mr.rkey(), 4096, 1));
        int oldKey = b.mr.rkey();
        b.mr.dereg();
        assertEquals(1, ibs.get(1).mkeyCache().counters(ndescs)[2], "dereg kept the revoked mkey");
        long mark = lastSeq(1);
        long umrs = models.get(1).umrsExecuted();
        // a second buffer, other frames: the reused mkey must translate to them, not to the old ones
        long buf2 = proc.mmap(1 << 20);
        proc.populate(buf2, 1 << 20, true);
        IbvMr again = b.pd.regMr(buf2, 1 << 20, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE);
        assertEquals(oldKey, again.rkey(), "the cached mkey, its variant kept as mlx5_ib keeps it");
        assertEquals(0, commands(1, org.peerdirect.hca.cx4.ifc.Mlx5Cmd.CREATE_MKEY, mark), "no CREATE_MKEY: enabled by UMR");
        assertTrue(models.get(1).umrsExecuted() > umrs, "the device executed the enabling UMR");
        long[] c1 = ibs.get(1).mkeyCache().counters(ndescs);
        assertEquals(1, c1[0], "a hit");
        assertEquals(0, c1[2], "taken from the cache");
        byte[] sent = fill(a.buf, 8192, 7);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 8192, a.mr.lkey(), 9);
        w.remoteAddr = buf2 + 4096;
        w.rkey = again.rkey();
        a.qp.postSend(w);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertArrayEquals(sent, read(buf2 + 4096, 8192), "the bytes landed in the new buffer through the reused mkey");
        // the new rights hold: no remote read on this registration
        IbvSendWr r = wr(IbvWrOpcode.RDMA_READ, a.buf, 64, a.mr.lkey(), 10);
        r.remoteAddr = buf2;
        r.rkey = again.rkey();
        a.qp.postSend(r);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, one(a.cq).status, "REMOTE_READ was not granted to the new registration");
        again.dereg();
        proc.munmap(buf2, 1 << 20);
    }

    /** A key deregistered (revoked by UMR, kept free in the cache) admits nothing: the remote write fails. */
    @Test
    void aDeregisteredKeyKeptInTheCacheAdmitsNoAccess() {
        End a = new End(0, IbvQpType.RC);
        End b = new End(1, IbvQpType.RC);
        connect(a, b);
        connect(b, a);
        int rkey = b.mr.rkey();
        b.mr.dereg();
        byte[] before = read(b.buf, 4096);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, write(a, b, rkey, 4096, 3), "a revoked mkey: remote access error");
        assertArrayEquals(before, read(b.buf, 4096), "nothing written");
    }

    /**
     * Peer memory on mlx5: never from the cache (an mkey by CREATE_MKEY); an invalidation revokes
     * it by UMR before the callback returns (later writes fail, no DESTROY_MKEY yet); the dereg
     * then destroys it.
     */
    @Test
    void aPeerInvalidationRevokesByUmrAndTheDeregOnlyFinishesTheCleanup() {
        org.peerdirect.example.peermem.ExamplePeerMemory gpu = new org.peerdirect.example.peermem.ExamplePeerMemory(mm, "example_peer", 4096, false);
        core.peerMemory().register(gpu, true);
        try {
            End a = new End(0, IbvQpType.RC);
            End b = new End(1, IbvQpType.RC);
            connect(a, b);
            connect(b, a);
            long dev = gpu.alloc(proc.pid(), 1 << 16);
            long mark = lastSeq(1);
            long[] before = ibs.get(1).mkeyCache().counters(16);
            IbvMr peer = b.pd.regMr(dev, 1 << 16, RW);
            assertTrue(peer.isPeer(), "registered through the peer client");
            assertEquals(1, commands(1, org.peerdirect.hca.cx4.ifc.Mlx5Cmd.CREATE_MKEY, mark), "a peer MR's mkey is created by command");
            assertArrayEquals(before, ibs.get(1).mkeyCache().counters(16), "the cache was not asked");
            byte[] sent = fill(a.buf, 4096, 5);
            IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 4096, a.mr.lkey(), 1);
            w.remoteAddr = dev;
            w.rkey = peer.rkey();
            a.qp.postSend(w);
            assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
            assertArrayEquals(sent, read(dev, 4096));
            long umrs = models.get(1).umrsExecuted();
            assertEquals(1, gpu.invalidate(proc.pid(), dev));
            assertTrue(peer.invalidated(), "the MR knows it was invalidated");
            assertEquals(umrs + 1, models.get(1).umrsExecuted(), "revoked by one UMR");
            assertEquals(0, commands(1, org.peerdirect.hca.cx4.ifc.Mlx5Cmd.DESTROY_MKEY, mark), "revoked, not destroyed");
            a.qp.postSend(w);
            assertEquals(IbvWcStatus.REM_ACCESS_ERR, one(a.cq).status, "the revoked key admits nothing");
            peer.dereg();
            assertEquals(1, commands(1, org.peerdirect.hca.cx4.ifc.Mlx5Cmd.DESTROY_MKEY, mark), "dereg destroyed it");
            gpu.free(proc.pid(), dev);
        } finally {
            core.peerClients().forEach(x -> x.unregister());
        }
    }

    /**
     * A UMR the device refuses (an mkey that does not exist) completes in error; the driver names
     * the syndrome, takes its UMR QP back to RTS, and the next registration works.
     */
    @Test
    void aRefusedUmrEndsInAnErrorNamingTheSyndromeAndTheChannelRecovers() {
        Mlx5Umr umr = ibs.get(0).umr();
        KernelException e = assertThrows(KernelException.class, () -> umr.revokeMr(0x0fff_ff00));
        assertEquals(KernelException.Errno.EPERM, e.errno());
        assertTrue(e.getMessage().contains("syndrome 0x4"), e.getMessage());
        IbvContext ctx = devs.get(0).open(proc);
        IbvPd pd = ctx.allocPd();
        long buf = proc.mmap(1 << 16);
        proc.populate(buf, 1 << 16, true);
        long umrs = models.get(0).umrsExecuted();
        IbvMr mr = pd.regMr(buf, 1 << 16, RW);
        assertTrue(models.get(0).umrsExecuted() > umrs, "the recovered channel enabled the cached mkey by UMR");
        assertEquals(1, ibs.get(0).mkeyCache().counters(16)[3], "the registration holds a cache mkey");
        mr.dereg();
        pd.dealloc();
        ctx.close();
    }

    /**
     * Temporary entries ({@code cache_ent_find_and_store}): an MR with a right no UMR sets (the
     * FLUSH right on the model) matches no persistent entry, so its mkey is created by command;
     * at dereg it is revoked and kept in a temporary entry keyed by that right. The next MR with
     * the same right takes it (a hit, enabled by UMR, the right still there: an RDMA FLUSH through
     * it succeeds); an MR without the right never does. The entry goes, its mkey destroyed by
     * command, once it saw no addition for its timeout (30 s in the kernel, 500 ms here).
     */
    @Test
    void anMrWithARightUmrCannotSetIsKeptInATemporaryEntryThatExpires() throws InterruptedException {
        ibs.get(1).cacheSettings(new Mlx5MkeyCache.Settings(300_000, 500)); // before End's registration starts the cache
        End a = new End(0, IbvQpType.RC);
        End b = new End(1, IbvQpType.RC);
        connect(a, b);
        new RcConnect().access(RW | IbAccess.FLUSH_GLOBAL).minRnrTimer(1).timeout(14, 7).connect(b.qp, a.lid, a.qp.qpNum());
        Mlx5MkeyCache cache = ibs.get(1).mkeyCache();
        int flushRw = RW | IbAccess.FLUSH_GLOBAL;
        long mark = lastSeq(1);
        IbvMr f1 = b.pd.regMr(b.buf, 1 << 16, flushRw);
        assertEquals(1, commands(1, org.peerdirect.hca.cx4.ifc.Mlx5Cmd.CREATE_MKEY, mark), "no entry holds mkeys with the FLUSH right: by command");
        assertNull(cache.counters(IbAccess.FLUSH_GLOBAL, 16), "no entry serves the FLUSH key yet");
        int key1 = f1.rkey();
        f1.dereg();
        assertEquals(0, commands(1, org.peerdirect.hca.cx4.ifc.Mlx5Cmd.DESTROY_MKEY, mark), "revoked and kept, not destroyed");
        assertArrayEquals(new long[] {0, 0, 1, 0}, cache.counters(IbAccess.FLUSH_GLOBAL, 16), "one mkey in the FLUSH key's entry");
        assertTrue(ibs.get(1).mkeyCacheSummary(false).contains("ndescs      16 access 0x" + Integer.toHexString(IbAccess.FLUSH_GLOBAL) + " temporary"),
                ibs.get(1).mkeyCacheSummary(false));
        // without the right: the persistent entry's mkey, never the temporary one
        IbvMr plain = b.pd.regMr(b.buf, 1 << 16, RW);
        assertNotEquals(key1, plain.rkey());
        assertEquals(1, cache.counters(IbAccess.FLUSH_GLOBAL, 16)[2], "the temporary entry kept its mkey");
        // the same right: a hit on the temporary entry, enabled by UMR, the right kept from the mkey's creation
        mark = lastSeq(1);
        IbvMr f2 = b.pd.regMr(b.buf + (1 << 16), 1 << 15, flushRw);
        assertEquals(key1, f2.rkey(), "the kept mkey, from the temporary entry");
        assertEquals(0, commands(1, org.peerdirect.hca.cx4.ifc.Mlx5Cmd.CREATE_MKEY, mark), "no CREATE_MKEY");
        assertArrayEquals(new long[] {1, 0, 0, 1}, cache.counters(IbAccess.FLUSH_GLOBAL, 8), "a hit (8 pages within twice the entry's 16)");
        assertEquals(IbvWcStatus.SUCCESS, flushGlobal(a, b.buf + (1 << 16), f2.rkey()), "the FLUSH right came with the mkey");
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, flushGlobal(a, b.buf, plain.rkey()), "and a plain MR's mkey has none");
        plain.dereg();
        f2.dereg();
        // expiry: the entry goes with its mkey once idle for its timeout (bounded wait on the cache's work)
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        // the work drops the entry under the cache's lock, then destroys its mkeys by command outside it: wait for both
        while ((cache.counters(IbAccess.FLUSH_GLOBAL, 16) != null || commands(1, org.peerdirect.hca.cx4.ifc.Mlx5Cmd.DESTROY_MKEY, mark) == 0)
                && System.nanoTime() < deadline) {
            Thread.sleep(5); // polling a state the cache's work thread changes; the bound is the deadline
        }
        assertNull(cache.counters(IbAccess.FLUSH_GLOBAL, 16), "the temporary entry expired: " + ibs.get(1).mkeyCacheSummary(true));
        assertEquals(1, commands(1, org.peerdirect.hca.cx4.ifc.Mlx5Cmd.DESTROY_MKEY, mark), "its mkey destroyed by command");
        assertFalse(ibs.get(1).mkeyCacheSummary(true).contains("temporary"), ibs.get(1).mkeyCacheSummary(true));
    }

    /** An RDMA FLUSH (global placement, range level) of 4 KiB at {@code addr} through {@code rkey}: its status. */
    static IbvWcStatus flushGlobal(End a, long addr, int rkey) {
        IbvSendWr f = wr(IbvWrOpcode.FLUSH, 0, 0, 0, 11);
        f.numSge = 0;
        f.remoteAddr = addr;
        f.rkey = rkey;
        f.flushLength = 4096;
        f.flushType = IbvSendWr.FLUSH_GLOBAL;
        f.flushLevel = IbvSendWr.FLUSH_RANGE;
        a.qp.postSend(f);
        return one(a.cq).status;
    }

    /** debugfs' limit: the background work fills the entry to twice the limit; the teardown destroys every cached mkey (down() checks). */
    @Test
    void aCacheLimitIsFilledInTheBackgroundAndTheTeardownTakesEverythingBack() throws InterruptedException {
        ibs.get(0).setMkeyCacheLimit(16, 3);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (ibs.get(0).mkeyCache().counters(16)[2] < 6 && System.nanoTime() < deadline) {
            Thread.sleep(5); // polling a counter the background thread moves; the bound is the deadline
        }
        assertEquals(6, ibs.get(0).mkeyCache().counters(16)[2], "filled to the high water: " + ibs.get(0).mkeyCacheSummary(true));
        assertTrue(ibs.get(0).mkeyCacheSummary(false).contains("limit 3"), ibs.get(0).mkeyCacheSummary(false));
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> ibs.get(0).setMkeyCacheLimit(17, 1));
        assertTrue(bad.getMessage().contains("17"), bad.getMessage());
    }
}
