package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.wire.FaultyLink;
import org.peerdirect.hca.wire.RxeCounters;

/**
 * RDMA FLUSH and XRC on the packet path against the in-JVM path: the same traffic on the fabric
 * and over a UDP loopback tunnel (also a lossy one) gives the same completions, the same bytes in
 * memory and, for FLUSH, the same flushing reads at the responder's memory.
 */
class WireXrcFlushTest extends EngineRig {

    /** The ports of the last run on a wire. */
    WirePort[] lastWire;

    // ------------------------------------------------------------------ FLUSH

    /** Side {@code i}, its device's DMA port recording every flushing read (page of its IOVA + bytes) into {@code flushes}. */
    Side recording(int i, List<String> flushes) {
        long[] iova = {0};
        Side s = new Side(i, d -> new PageFaultTest.Forwarding(d) {
            @Override
            public void flush(long va, long len) {
                flushes.add((va - iova[0]) / 4096 + "+" + len);
                super.flush(va, len);
            }
        }, true);
        iova[0] = s.iova;
        return s;
    }

    /** RC a to b (b's QP takes {@code flushBits} besides read/write/atomic), over the wire when the IPs are given. */
    static void connectFlush(Side a, Side b, int ipOfB, int ipOfA, int flushBits, int retry) {
        int rw = QpContext.BIT_RRE | QpContext.BIT_RWE | QpContext.BIT_RAE;
        connect(a.qp, b.qp, ipOfB, b.lid(), rw, retry);
        connect(b.qp, a.qp, ipOfA, a.lid(), rw | flushBits, retry);
    }

    /** {@code q} to {@code peer} at path MTU 1024 with PSNs that wrap during the run; over the wire by the peer's GID. */
    static void connect(HwQp q, HwQp peer, int peerIp, int peerLid, int access, int retry) {
        QpContext c = new QpContext();
        c.remoteAccess = access;
        c.mtu = 3;
        c.retryCount = retry;
        c.rnrRetry = 3;
        c.minRnrTimer = 1;
        c.sraMax = 4;
        c.ackTimeout = 10;
        q.modify(QpCommand.RST2INIT, c);
        c.dlid = peerIp == 0 ? peerLid : 0;
        if (peerIp != 0) {
            WirePort.mappedGid(c.rgid, peerIp);
        }
        c.remoteQpn = peer.qpn;
        c.rqPsn = 0xFFFFFA;
        c.sqPsn = 0xFFFFFA;
        q.modify(QpCommand.INIT2RTR, c);
        q.modify(QpCommand.RTR2RTS, c);
    }

    /** One FLUSH WQE posted without ringing (the caller rings once for several). */
    static void postFlush(Side a, int rkey, long va, long len, int type, int level) {
        SendWqe w = a.wqe(Wqe.OP_FLUSH, 0, 0);
        w.numSge = 0;
        w.length = len;
        w.remoteAddr = va;
        w.rkey = rkey;
        w.flushType = type;
        w.flushLevel = level;
    }

    /**
     * WRITEs, then FLUSHes behind them in one ring (persistent over a range, persistent over the
     * whole MR, global alone), a READ after them; then, unless {@code lastType} is -1, a FLUSH the
     * responder refuses: a key without the rights (0) or a placement type the QP does not take.
     */
    List<String> flushTraffic(Side a, Side b, int flushKey, int noRightKey, int lastType) {
        List<String> out = new ArrayList<>();
        byte[] pattern = new byte[16384];
        for (int i = 0; i < pattern.length; i++) {
            pattern[i] = (byte) (i * 11 + 1);
        }
        proc.write(a.va, pattern, 0, pattern.length);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va + 3, 6000);
        w.remoteAddr = b.va + 4096 + 100;
        w.rkey = b.key;
        a.sqPi++;
        postFlush(a, flushKey, b.va + 4096 + 100, 6000, Wqe.FLUSH_PERSISTENT, Wqe.FLUSH_RANGE);
        a.sqPi++;
        w = a.wqe(Wqe.OP_RDMA_WRITE, a.va + 9000, 100);
        w.remoteAddr = b.va + 30000;
        w.rkey = b.key;
        a.sqPi++;
        postFlush(a, flushKey, 0, 0, Wqe.FLUSH_PERSISTENT, Wqe.FLUSH_MR);
        a.sqPi++;
        postFlush(a, flushKey, b.va, 1 << 16, Wqe.FLUSH_GLOBAL, Wqe.FLUSH_RANGE);
        a.sqPi++;
        w = a.wqe(Wqe.OP_RDMA_READ, a.va + 40000, 3000);
        w.remoteAddr = b.va + 4096;
        w.rkey = b.key;
        a.sqPi++;
        a.qp.sqDoorbellRecord(a.sqPi);
        a.qp.ringSqDoorbell();
        for (int i = 0; i < 6; i++) {
            out.add(WireTest.show(WireTest.await(a)));
        }
        if (lastType < 0) {
            return out;
        }
        // the refused one: a key without the FLUSH rights (remote access) or a type the QP does not take (invalid request)
        postFlush(a, lastType == 0 ? noRightKey : flushKey, b.va, 4096, lastType == 0 ? Wqe.FLUSH_GLOBAL : lastType, Wqe.FLUSH_RANGE);
        a.ring();
        out.add(WireTest.show(WireTest.await(a)));
        out.add(WireTest.awaitState(a, HwQpState.ERR) + "/" + WireTest.awaitState(b, HwQpState.ERR));
        return out;
    }

    /** The FLUSH traffic on one pair; the completions, then the flushing reads b's memory saw. */
    List<String> flushRun(int i, boolean wire, FaultyLink.Faults faults, int qpBits, int lastType) {
        List<String> flushes = new CopyOnWriteArrayList<>();
        // a's port forwards too: a device-to-device copy unwraps its peer's forwarding port (PageFaultTest.Forwarding)
        Side a = new Side(i, PageFaultTest.Forwarding::new, true);
        Side b = recording(i + 1, flushes);
        if (wire) {
            lastWire = WireTest.wire(a, b, faults == null ? l -> l : l -> new FaultyLink(l, faults));
        }
        connectFlush(a, b, wire ? WireTest.IP_B : 0, wire ? WireTest.IP_A : 0, qpBits, 7);
        int perms = ALL | HcaDevice.PERM_FLUSH_GLOBAL | HcaDevice.PERM_FLUSH_PERSISTENT;
        int flushKey = b.dev.sw2hwMpt(1, b.va, 1 << 16, perms, new long[] {b.iova}, new long[] {1L << 16});
        List<String> out = flushTraffic(a, b, flushKey, b.key, lastType);
        out.add("flushes " + flushes);
        byte[] m = new byte[1 << 16];
        proc.read(b.va, m, 0, m.length);
        out.add("b " + java.util.Arrays.hashCode(m));
        proc.read(a.va, m, 0, m.length);
        out.add("a " + java.util.Arrays.hashCode(m));
        return out;
    }

    @Test
    void flushGivesTheSameOnTheFabricAndOnTheWire() {
        int both = QpContext.BIT_FLUSH_GLOBAL | QpContext.BIT_FLUSH_PERSISTENT;
        List<String> direct = flushRun(0, false, null, both, 0);
        List<String> wire = flushRun(2, true, null, both, 0);
        assertEquals(direct, wire);
        assertTrue(direct.get(1).contains("op=1c") && direct.get(1).contains("bytes=6000"), "the FLUSH completed: " + direct);
        assertTrue(direct.get(6).contains("syn=13"), "a key without the FLUSH rights: a remote access error: " + direct);
        assertTrue(direct.get(8).startsWith("flushes [1+") && direct.get(8).length() > "flushes [".length() + 4,
                "the persistent FLUSHes read the written pages: " + direct);
        // a QP that takes only the persistent type refuses the global one as an invalid request (rxe's unsupported opcode)
        direct = flushRun(4, false, null, QpContext.BIT_FLUSH_PERSISTENT, Wqe.FLUSH_GLOBAL);
        wire = flushRun(6, true, null, QpContext.BIT_FLUSH_PERSISTENT, Wqe.FLUSH_GLOBAL);
        assertEquals(direct, wire);
        assertTrue(direct.get(4).contains("syn=12"), "the global type the QP does not take: an invalid request: " + direct);
    }

    @Test
    void flushOnALossyLinkGivesTheSame() {
        int both = QpContext.BIT_FLUSH_GLOBAL | QpContext.BIT_FLUSH_PERSISTENT;
        List<String> direct = flushRun(0, false, null, both, -1);
        FaultyLink.Faults f = new FaultyLink.Faults(0.15, 0.1, 0.1, 0.05, 0, 7);
        List<String> wire = flushRun(2, true, f, both, -1);
        assertTrue(lastWire[0].counters().get(RxeCounters.COMP_RETRY) > 0, "the faults cost retransmissions: " + lastWire[0].counters().snapshot());
        // no error at the end here: a lost NAK retried into a QP in ERR is dropped (rxe does the same);
        // a duplicate FLUSH is answered again without flushing again, so the flushing reads are the fabric's
        assertEquals(direct, wire);
    }

    // ------------------------------------------------------------------ XRC

    /** An XRC initiator on a, a target on b, the target's XRC SRQ (and a foreign and a basic one) with receives posted. */
    final class Xrc {
        final Side a;
        final Side b;
        final HwQp ini;
        final HwQp tgt;
        final HwSrq srq;
        final HwSrq foreign;
        final HwSrq basic;
        long sqPi;

        Xrc(Side a, Side b, int ipOfB, int ipOfA, int retry) {
            this.a = a;
            this.b = b;
            ini = a.dev.createXrcQp(1, 5, false, new QpCaps(8, 8, 2, 2, 64, false), a.cq);
            tgt = b.dev.createXrcQp(1, 9, true, null, null);
            srq = b.dev.sw2hwXrcSrq(1, 9, b.cq, 8, 2);
            foreign = b.dev.sw2hwXrcSrq(1, 10, b.cq, 4, 1);
            basic = b.dev.sw2hwSrq(1, 4, 1);
            for (int k = 0; k < 3; k++) {
                RecvWqe r = srq.queue().slot(k);
                r.numSge = 1;
                r.addr[0] = b.va + 16384 + 4096 * k;
                r.byteCount[0] = 4096;
                r.lkey[0] = b.key;
            }
            srq.queue().doorbell(3);
            int rw = QpContext.BIT_RRE | QpContext.BIT_RWE | QpContext.BIT_RAE;
            connect(ini, tgt, ipOfB, b.lid(), rw, retry);
            connect(tgt, ini, ipOfA, a.lid(), rw, retry);
        }

        SendWqe wqe(int opcode, long local, int len, HwSrq to) {
            SendWqe w = ini.sqSlot(sqPi);
            w.opcode = opcode;
            w.ctrl = Wqe.CTRL_CQ_UPDATE;
            w.numSge = len == 0 ? 0 : 1;
            w.addr[0] = local;
            w.byteCount[0] = len;
            w.lkey[0] = a.key;
            w.length = len;
            w.xrcSrqn = to.srqn;
            w.remoteAddr = 0;
            w.rkey = 0;
            return w;
        }

        void ring() {
            ini.sqDoorbellRecord(++sqPi);
            ini.ringSqDoorbell();
        }
    }

    /** SENDs (one and several packets), WRITE, WRITE with immediate, READ, atomics through an XRC pair; then {@code end}'s SRQ. */
    List<String> xrcTraffic(Xrc x, HwSrq end) {
        Side a = x.a;
        Side b = x.b;
        List<String> out = new ArrayList<>();
        byte[] pattern = new byte[16384];
        for (int i = 0; i < pattern.length; i++) {
            pattern[i] = (byte) (i * 5 + 9);
        }
        proc.write(a.va, pattern, 0, pattern.length);
        proc.write(b.va + 32768, pattern, 0, pattern.length);
        x.wqe(Wqe.OP_SEND, a.va, 64, x.srq);
        x.ring();
        out.add(WireTest.show(WireTest.await(a)));
        out.add(WireTest.show(WireTest.await(b)));
        x.wqe(Wqe.OP_SEND, a.va + 100, 3000, x.srq); // three packets, each with its XRCETH
        x.ring();
        out.add(WireTest.show(WireTest.await(a)));
        out.add(WireTest.show(WireTest.await(b)));
        SendWqe w = x.wqe(Wqe.OP_RDMA_WRITE, a.va + 5, 5000, x.srq);
        w.remoteAddr = b.va + 1000;
        w.rkey = b.key;
        x.sqPi++;
        w = x.wqe(Wqe.OP_RDMA_WRITE_IMM, a.va + 8000, 2048, x.srq);
        w.remoteAddr = b.va + 40000;
        w.rkey = b.key;
        w.imm = 0x5566_7788;
        x.sqPi++;
        w = x.wqe(Wqe.OP_RDMA_READ, a.va + 50000, 4000, x.srq);
        w.remoteAddr = b.va + 32768 + 17;
        w.rkey = b.key;
        x.sqPi++;
        w = x.wqe(Wqe.OP_ATOMIC_FA, a.va + 60000, 8, x.srq);
        w.remoteAddr = b.va + 48;
        w.rkey = b.key;
        w.compareAdd = 5;
        x.sqPi++;
        w = x.wqe(Wqe.OP_ATOMIC_CS, a.va + 60008, 8, x.srq);
        w.remoteAddr = b.va + 48;
        w.rkey = b.key;
        w.compareAdd = proc.readLong(b.va + 48) + 5;
        w.swap = 0x0102_0304_0506_0708L;
        x.sqPi++;
        x.ini.sqDoorbellRecord(x.sqPi);
        x.ini.ringSqDoorbell();
        for (int i = 0; i < 5; i++) {
            out.add(WireTest.show(WireTest.await(a)));
        }
        Cqe c = WireTest.await(b);
        out.add(WireTest.show(c) + " srq=" + (c.srqn == x.srq.srqn));
        if (end == null) {
            return out;
        }
        // a SEND naming another domain's XRC SRQ, or a basic SRQ: dropped unanswered, the requester retries out
        x.wqe(Wqe.OP_SEND, a.va, 16, end);
        x.ring();
        out.add(WireTest.show(WireTest.await(a)));
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (x.ini.state() != HwQpState.ERR && System.nanoTime() < deadline) {
            Thread.onSpinWait(); // the error CQE comes before the move to ERR
        }
        return out;
    }

    List<String> xrcRun(int i, boolean wire, FaultyLink.Faults faults, int retry, boolean foreignEnd) {
        Side a = new Side(i, true);
        Side b = new Side(i + 1, true);
        if (wire) {
            lastWire = WireTest.wire(a, b, faults == null ? l -> l : l -> new FaultyLink(l, faults));
        }
        Xrc x = new Xrc(a, b, wire ? WireTest.IP_B : 0, wire ? WireTest.IP_A : 0, retry);
        List<String> out = xrcTraffic(x, retry == 7 ? null : foreignEnd ? x.foreign : x.basic);
        out.add("tgt " + x.tgt.state() + " ini " + x.ini.state());
        byte[] m = new byte[1 << 16];
        proc.read(b.va, m, 0, m.length);
        out.add("b " + java.util.Arrays.hashCode(m));
        proc.read(a.va, m, 0, m.length);
        out.add("a " + java.util.Arrays.hashCode(m));
        return out;
    }

    @Test
    void xrcGivesTheSameOnTheFabricAndOnTheWire() {
        List<String> direct = xrcRun(0, false, null, 2, true);
        List<String> wire = xrcRun(2, true, null, 2, true);
        assertEquals(direct, wire);
        assertTrue(lastWire[1].counters().get(RxeCounters.RCVD_BAD_HDR) >= 3, "the SEND to another domain's SRQ dropped at each try: "
                + lastWire[1].counters().snapshot());
        assertTrue(direct.get(direct.size() - 4).contains("syn=15"), "another domain's SRQ: retry exceeded: " + direct);
        direct = xrcRun(4, false, null, 2, false);
        wire = xrcRun(6, true, null, 2, false);
        assertEquals(direct, wire);
        assertTrue(direct.get(direct.size() - 4).contains("syn=15"), "a basic SRQ: retry exceeded: " + direct);
    }

    @Test
    void xrcOnALossyLinkGivesTheSame() {
        List<String> direct = xrcRun(0, false, null, 7, false);
        FaultyLink.Faults f = new FaultyLink.Faults(0.1, 0.1, 0.1, 0.05, 0, 11);
        List<String> wire = xrcRun(2, true, f, 7, false);
        assertEquals(direct, wire);
        assertTrue(lastWire[0].counters().get(RxeCounters.COMP_RETRY) > 0, "the faults cost retransmissions: " + lastWire[0].counters().snapshot());
    }

    /** The IBA has no XRC FLUSH or ATOMIC WRITE opcode: on a wire they fail locally (LOC_QP_OP_ERR), nothing is sent. */
    @Test
    void xrcFlushAndAtomicWriteHaveNoOpcodeOnTheWire() {
        for (int op : new int[] {Wqe.OP_FLUSH, Wqe.OP_ATOMIC_WRITE}) {
            Side a = new Side(op == Wqe.OP_FLUSH ? 0 : 2, true);
            Side b = new Side(op == Wqe.OP_FLUSH ? 1 : 3, true);
            lastWire = WireTest.wire(a, b, l -> l);
            Xrc x = new Xrc(a, b, WireTest.IP_B, WireTest.IP_A, 2);
            int ePsn = x.tgt.resp.ePsn;
            SendWqe w = x.wqe(op, 0, 0, x.srq);
            w.remoteAddr = b.va;
            w.rkey = b.key;
            w.length = 8;
            x.ring();
            Cqe c = WireTest.await(a);
            assertEquals(Cqe.SYNDROME_LOCAL_QP_OP_ERR, c.syndrome, WireTest.show(c));
            assertEquals(ePsn, x.tgt.resp.ePsn, "nothing reached the target");
            assertEquals(0, lastWire[1].counters().get(RxeCounters.RCVD_PKTS), "no packet went out");
        }
    }
}
