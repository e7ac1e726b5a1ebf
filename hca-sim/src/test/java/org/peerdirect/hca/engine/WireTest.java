package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.wire.FaultyLink;
import org.peerdirect.hca.wire.Link;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.UdpTunnelLink;

/**
 * The packet path against the in-JVM path: the same traffic between two Ethernet devices on the
 * fabric and between two devices whose ports are joined by a UDP tunnel (real RoCEv2 frames over
 * the loopback) gives the same completions and the same bytes in memory. Then the wire's own
 * cases: faults on the link, a peer that does not answer.
 */
class WireTest extends EngineRig {

    static final int IP_A = RxeNet.parseIp("10.99.0.1");
    static final int IP_B = RxeNet.parseIp("10.99.0.2");

    /** Joins a's and b's ports by a UDP tunnel pair (each side's link wrapped by {@code wrap}). */
    static WirePort[] wire(Side a, Side b, java.util.function.UnaryOperator<Link> wrap) {
        UdpTunnelLink[] l = UdpTunnelLink.pair("a", "b");
        WirePort wa = a.dev.attachWire(1, wrap.apply(l[0]), IP_A, 0x0200_0a63_0001L, 1500);
        WirePort wb = b.dev.attachWire(1, wrap.apply(l[1]), IP_B, 0x0200_0a63_0002L, 1500);
        return new WirePort[] {wa, wb};
    }

    /** RC connect at path MTU 1024 with PSNs that wrap during the run; over the wire by the peer's GID. */
    static void connect(Side s, Side peer, int peerIp, int retry) {
        QpContext c = new QpContext();
        c.remoteAccess = QpContext.BIT_RRE | QpContext.BIT_RWE | QpContext.BIT_RAE;
        c.mtu = 3;
        c.retryCount = retry;
        c.rnrRetry = 3;
        c.minRnrTimer = 1;
        c.sraMax = 4; // max_rd_atomic: READs and atomics in flight together on the wire
        c.ackTimeout = 10; // about 4 ms: short for the lossy link's retransmissions, long enough for a loaded machine with retry 7
        s.qp.modify(QpCommand.RST2INIT, c);
        c.dlid = peerIp == 0 ? peer.lid() : 0;
        if (peerIp != 0) {
            WirePort.mappedGid(c.rgid, peerIp);
        }
        c.remoteQpn = peer.qp.qpn;
        c.rqPsn = 0xFFFFF8;
        c.sqPsn = 0xFFFFF8;
        s.qp.modify(QpCommand.INIT2RTR, c);
        s.qp.modify(QpCommand.RTR2RTS, c);
    }

    static Cqe await(Side s) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (s.cq.producerIndex() <= s.cqCi) {
            assertTrue(System.nanoTime() < deadline, "a CQE within 20 s on " + s.dev.name());
            Thread.onSpinWait();
        }
        return s.cqe();
    }

    static String show(Cqe c) {
        return String.format("%s op=%x syn=%x bytes=%d imm=%x idx=%d flags=%x", c.isSend ? "send" : "recv", c.opcode, c.syndrome, c.byteCnt,
                c.imm, c.wqeIndex, c.flags);
    }

    /** The traffic: SENDs (one and several packets), WRITEs, WRITE with immediate, READ, atomics; what completed and what is in memory. */
    List<String> traffic(Side a, Side b, boolean endWithError) {
        List<String> out = new ArrayList<>();
        byte[] pattern = new byte[16384];
        for (int i = 0; i < pattern.length; i++) {
            pattern[i] = (byte) (i * 7 + 3);
        }
        proc.write(a.va, pattern, 0, pattern.length);
        proc.write(b.va + 32768, pattern, 0, pattern.length);
        b.recv(b.va + 16384, 4096);
        b.recv(b.va + 20480, 4096);
        b.recv(b.va + 24576, 64);
        a.wqe(Wqe.OP_SEND, a.va, 64);
        a.ring();
        out.add(show(await(a)));
        out.add(show(await(b)));
        a.wqe(Wqe.OP_SEND, a.va + 100, 3000); // three packets
        a.ring();
        out.add(show(await(a)));
        out.add(show(await(b)));
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va + 5, 5000);
        w.remoteAddr = b.va + 1000;
        w.rkey = b.key;
        a.ring();
        out.add(show(await(a)));
        w = a.wqe(Wqe.OP_RDMA_WRITE_IMM, a.va + 8000, 2048);
        w.remoteAddr = b.va + 40000;
        w.rkey = b.key;
        w.imm = 0x1234_5678;
        a.ring();
        out.add(show(await(a)));
        out.add(show(await(b)));
        w = a.wqe(Wqe.OP_RDMA_READ, a.va + 50000, 4000);
        w.remoteAddr = b.va + 32768 + 17;
        w.rkey = b.key;
        a.ring();
        out.add(show(await(a)));
        w = a.wqe(Wqe.OP_ATOMIC_FA, a.va + 60000, 8);
        w.remoteAddr = b.va + 48;
        w.rkey = b.key;
        w.compareAdd = 5;
        a.ring();
        out.add(show(await(a)));
        w = a.wqe(Wqe.OP_ATOMIC_CS, a.va + 60008, 8);
        w.remoteAddr = b.va + 48;
        w.rkey = b.key;
        w.compareAdd = proc.readLong(b.va + 48);
        w.swap = 0x0102_0304_0506_0708L;
        a.ring();
        out.add(show(await(a)));
        w = a.wqe(Wqe.OP_ATOMIC_WRITE, 0, 8);
        w.numSge = 0;
        w.compareAdd = 0x1122_3344_5566_7788L;
        w.remoteAddr = b.va + 56;
        w.rkey = b.key;
        a.ring();
        out.add(show(await(a)));
        if (!endWithError) {
            return out;
        }
        // a bad rkey ends it: remote access error, both QPs in ERR
        w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 16);
        w.remoteAddr = b.va;
        w.rkey = b.key + 1;
        a.ring();
        out.add(show(await(a)));
        // the completer writes the error CQE, then moves its QP to ERR (rxe_comp.c: do_complete, then
        // rxe_qp_error): a poller can see the CQE while the QP is still RTS, so the state is awaited
        out.add(awaitState(a, HwQpState.ERR) + "/" + awaitState(b, HwQpState.ERR));
        return out;
    }

    /**
     * Eight WQEs posted and rung at once (the send queue full): WRITEs, a SEND of three packets, a
     * READ of what the first WRITE wrote, a WRITE with immediate, a fetch-and-add, a fenced READ, a
     * last WRITE. On a wire they are in flight together; the completions and the memory must be
     * those of the fabric, which runs them one after the other.
     */
    List<String> manyInFlight(Side a, Side b) {
        List<String> out = new ArrayList<>();
        byte[] pattern = new byte[1 << 16];
        for (int i = 0; i < pattern.length; i++) {
            pattern[i] = (byte) (i * 13 + 5);
        }
        proc.write(a.va, pattern, 0, pattern.length);
        b.recv(b.va + 16384, 4096);
        b.recv(b.va + 20480, 4096);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va + 7, 5000);
        w.remoteAddr = b.va + 1000;
        w.rkey = b.key;
        a.sqPi++;
        w = a.wqe(Wqe.OP_RDMA_WRITE, a.va + 9000, 3000);
        w.remoteAddr = b.va + 10000;
        w.rkey = b.key;
        a.sqPi++;
        a.wqe(Wqe.OP_SEND, a.va + 300, 3000);
        a.sqPi++;
        w = a.wqe(Wqe.OP_RDMA_READ, a.va + 50000, 4000);
        w.remoteAddr = b.va + 1000;
        w.rkey = b.key;
        a.sqPi++;
        w = a.wqe(Wqe.OP_RDMA_WRITE_IMM, a.va + 8000, 2048);
        w.remoteAddr = b.va + 40000;
        w.rkey = b.key;
        w.imm = 0x0bad_cafe;
        a.sqPi++;
        w = a.wqe(Wqe.OP_ATOMIC_FA, a.va + 60016, 8);
        w.remoteAddr = b.va + 64;
        w.rkey = b.key;
        w.compareAdd = 9;
        a.sqPi++;
        w = a.wqe(Wqe.OP_RDMA_READ, a.va + 61000, 100);
        w.ctrl |= Wqe.CTRL_FENCE;
        w.remoteAddr = b.va + 40000;
        w.rkey = b.key;
        a.sqPi++;
        w = a.wqe(Wqe.OP_RDMA_WRITE, a.va + 62000, 64);
        w.remoteAddr = b.va + 12;
        w.rkey = b.key;
        a.sqPi++;
        a.qp.sqDoorbellRecord(a.sqPi);
        a.qp.ringSqDoorbell();
        for (int i = 0; i < 8; i++) {
            out.add(show(await(a)));
        }
        out.add(show(await(b)));
        out.add(show(await(b)));
        return out;
    }

    static HwQpState awaitState(Side s, HwQpState want) {
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (s.qp.state() != want && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        return s.qp.state();
    }

    byte[] memory(Side s) {
        byte[] m = new byte[1 << 16];
        proc.read(s.va, m, 0, m.length);
        return m;
    }

    @Test
    void theSameTrafficGivesTheSameResultsOnTheFabricAndOnTheWire() {
        Side a1 = new Side(0, true);
        Side b1 = new Side(1, true);
        connect(a1, b1, 0, 7);
        connect(b1, a1, 0, 7);
        List<String> direct = manyInFlight(a1, b1);
        direct.addAll(traffic(a1, b1, true));

        Side a2 = new Side(2, true);
        Side b2 = new Side(3, true);
        WirePort[] w = wire(a2, b2, l -> l);
        connect(a2, b2, IP_B, 7);
        connect(b2, a2, IP_A, 7);
        List<String> wire = manyInFlight(a2, b2);
        assertTrue(a2.qp.requester.wire.maxInFlight > 1, "WQEs were in flight together: " + a2.qp.requester.wire.maxInFlight);
        wire.addAll(traffic(a2, b2, true));

        assertEquals(direct, wire);
        assertArrayEquals(memory(a1), memory(a2), "the requester's memory");
        assertArrayEquals(memory(b1), memory(b2), "the responder's memory");
        assertTrue(w[0].counters().get(RxeCounters.SENT_PKTS) >= 13, "packets went out: " + w[0].counters().snapshot());
        assertEquals(0, w[0].counters().get(RxeCounters.RCVD_ICRC_ERR) + w[1].counters().get(RxeCounters.RCVD_ICRC_ERR));
        // the two 4000-byte READs' MIDDLE responses (two each) went to the completer deferred, as rxe counts them
        assertEquals(4, w[0].counters().get(RxeCounters.ACK_DEFERRED), "ack_deferred");
        assertEquals(0, w[0].counters().get(RxeCounters.SEND_ERR) + w[1].counters().get(RxeCounters.SEND_ERR), "send_err");
        assertEquals(1, w[0].counters().get(RxeCounters.ARP_REQUESTS) + w[1].counters().get(RxeCounters.ARP_REQUESTS) > 0 ? 1 : 0);
    }

    @Test
    void aLossyLinkRetransmitsAndStillDeliversTheSame() {
        Side a1 = new Side(0, true);
        Side b1 = new Side(1, true);
        connect(a1, b1, 0, 7);
        connect(b1, a1, 0, 7);
        // no error at the end here: a lost NAK is retried into a responder in ERR, which drops it (rxe does the same)
        List<String> direct = manyInFlight(a1, b1);
        direct.addAll(traffic(a1, b1, false));

        Side a2 = new Side(2, true);
        Side b2 = new Side(3, true);
        FaultyLink.Faults f = new FaultyLink.Faults(0.1, 0.1, 0.1, 0.05, 0, 42);
        WirePort[] w = wire(a2, b2, l -> new FaultyLink(l, f));
        connect(a2, b2, IP_B, 7);
        connect(b2, a2, IP_A, 7);
        List<String> wire = manyInFlight(a2, b2);
        wire.addAll(traffic(a2, b2, false));
        assertEquals(direct, wire);
        assertArrayEquals(memory(b1), memory(b2));
        assertArrayEquals(memory(a1), memory(a2));
        long retries = w[0].counters().get(RxeCounters.COMP_RETRY);
        assertTrue(retries > 0, "the faults cost retransmissions: " + w[0].counters().snapshot());
    }

    /** A UD QP on side s with Q_Key 0x11111111 (ibv_ud_pingpong's), in RTS. */
    static HwQp udQp(Side s) {
        HwQp q = s.dev.createQp(1, HcaDevice.ST_UD, new QpCaps(8, 8, 2, 2, 64, false), s.cq, s.cq, null);
        QpContext c = new QpContext();
        c.qkey = 0x11111111;
        q.modify(QpCommand.RST2INIT, c);
        q.modify(QpCommand.INIT2RTR, c);
        q.modify(QpCommand.RTR2RTS, c);
        return q;
    }

    /** UD datagrams a to b: delivered after the 40-byte GRH room, the sender's QPN reported; a wrong Q_Key dropped. */
    List<String> ud(Side a, Side b, int peerIp) {
        HwQp qa = udQp(a);
        HwQp qb = udQp(b);
        List<String> out = new ArrayList<>();
        proc.write(a.va, new byte[] {9, 8, 7, 6, 5}, 0, 5);
        for (int k = 0; k < 2; k++) {
            RecvWqe r = qb.recvQueue().slot(k);
            r.numSge = 1;
            r.addr[0] = b.va + 8192 * k;
            r.byteCount[0] = 2048;
            r.lkey[0] = b.key;
            qb.rqDoorbell(k + 1);
        }
        for (int k = 0; k < 3; k++) {
            SendWqe w = qa.sqSlot(k);
            w.opcode = k == 1 ? Wqe.OP_SEND_IMM : Wqe.OP_SEND;
            w.imm = 0x77;
            w.ctrl = Wqe.CTRL_CQ_UPDATE;
            w.numSge = 1;
            w.addr[0] = a.va;
            w.byteCount[0] = 1000;
            w.lkey[0] = a.key;
            w.length = 1000;
            w.remoteQpn = qb.qpn;
            w.remoteQkey = k == 2 ? 0x222 : -1; // the third with a wrong Q_Key: dropped at the receiver
            w.dlid = peerIp == 0 ? b.lid() : 0;
            w.grh = true;
            WirePort.mappedGid(w.dgid, peerIp == 0 ? 0x0a000000 | b.lid() : peerIp);
            qa.sqDoorbellRecord(k + 1);
            qa.ringSqDoorbell();
            out.add(show(await(a)));
        }
        for (int k = 0; k < 2; k++) {
            Cqe c = await(b);
            out.add(show(c) + " src=" + (c.srcQp == qa.qpn));
        }
        return out;
    }

    @Test
    void udGivesTheSameOnTheFabricAndOnTheWire() {
        Side a1 = new Side(0, true);
        Side b1 = new Side(1, true);
        List<String> direct = ud(a1, b1, 0);
        Side a2 = new Side(2, true);
        Side b2 = new Side(3, true);
        WirePort[] w = wire(a2, b2, l -> l);
        List<String> wire = ud(a2, b2, IP_B);
        assertEquals(direct, wire);
        byte[] got = new byte[5];
        proc.read(b2.va + 40, got, 0, 5);
        assertArrayEquals(new byte[] {9, 8, 7, 6, 5}, got, "the payload after the GRH room");
        // the sender completes a UD send when it leaves; the receiver drops the third a moment later
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (w[1].counters().get(RxeCounters.RCVD_BAD_HDR) == 0 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(1, w[1].counters().get(RxeCounters.RCVD_BAD_HDR), "the wrong Q_Key was dropped and counted");
        assertEquals(b1.cq.producerIndex(), b2.cq.producerIndex(), "no third receive either way");
    }

    @Test
    void aPeerThatDoesNotAnswerEndsInRetryExceeded() {
        Side a = new Side(0, true);
        Side b = new Side(1, true);
        UdpTunnelLink[] l = UdpTunnelLink.pair("a", "nobody");
        WirePort wa = a.dev.attachWire(1, l[0], IP_A, 0x0200_0a63_0001L, 1500);
        l[1].close(); // nobody listens there: ARP goes unanswered
        connect(a, b, IP_B, 2);
        a.wqe(Wqe.OP_RDMA_WRITE, a.va, 64);
        a.ring();
        Cqe c = await(a);
        assertEquals(Cqe.SYNDROME_TRANSPORT_RETRY_EXC_ERR, c.syndrome);
        assertEquals(HwQpState.ERR, awaitState(a, HwQpState.ERR)); // the error CQE comes first
        assertEquals(2, wa.counters().get(RxeCounters.COMP_RETRY), "two retries (retry_cnt 2), then the error");
        assertEquals(1, wa.counters().get(RxeCounters.RETRY_EXCEEDED));
        a.dev.setPortActive(1, false);
        a.dev.setPortActive(1, true);
        assertEquals(1, wa.counters().get(RxeCounters.LINK_DOWNED), "the port's link went down once");
        assertTrue(wa.counters().get(RxeCounters.ARP_REQUESTS) >= 3, "each try asked ARP: " + wa.counters().snapshot());
    }
}
