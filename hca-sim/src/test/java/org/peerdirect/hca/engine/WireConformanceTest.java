package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.peerdirect.hca.wire.Frame;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeHdr;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.RxeOpcode;
import org.peerdirect.hca.wire.RxePkt;
import org.peerdirect.hca.wire.UdpTunnelLink;

/**
 * The wire's error paths against a hand-driven peer (the test builds every frame itself, as the
 * document's Python peer did against rxe): PSN sequence NAK once per gap, duplicates re-ACKed,
 * bad ICRC dropped silently, RNR NAK, rkey violation, unexpected opcode, unaligned atomic, READ
 * responses nobody asked for, ghost ACKs, garbage and a flood; and the requester's side: an RNR
 * NAK with and without retries left, a NAK's error, a PSN sequence NAK that resends part of a
 * message. Each answer is what rxe answers (ROCE_WIRE.md section 5.5).
 */
class WireConformanceTest extends EngineRig {

    static final int IP_DEV = RxeNet.parseIp("10.99.0.1");
    static final int IP_PEER = RxeNet.parseIp("10.99.0.2");
    static final long MAC_DEV = 0x0200_0a63_0001L;
    static final long MAC_PEER = 0x5254_0000_0002L;
    static final int PEER_QPN = 0x99;
    static final int PSN = 0x3000;

    UdpTunnelLink peerLink;
    final LinkedBlockingQueue<Frame> got = new LinkedBlockingQueue<>();
    final Frame tx = new Frame();
    int peerPsn = 0x5000;

    @AfterEach
    void closePeer() {
        if (peerLink != null) {
            peerLink.close();
        }
    }

    /** Device side a on a wire to the hand-driven peer; its RC QP connected to PEER_QPN with PSNs PSN. */
    Side deviceOnWire(int rnrRetry, int retry) {
        return deviceOnWire(0, rnrRetry, retry);
    }

    Side deviceOnWire(int i, int rnrRetry, int retry) {
        return deviceOnWire(i, rnrRetry, retry, QpContext.BIT_RRE | QpContext.BIT_RWE | QpContext.BIT_RAE);
    }

    Side deviceOnWire(int i, int rnrRetry, int retry, int remoteAccess) {
        Side a = new Side(i, true);
        UdpTunnelLink[] l = UdpTunnelLink.pair("dev", "peer");
        peerLink = l[1];
        peerLink.start(f -> {
            Frame c = new Frame();
            c.copyFrom(f);
            if (RxeNet.parse(c, new RxePkt(), MAC_PEER, IP_PEER) == RxeNet.ARP) {
                if (RxeNet.arpOp(c) == 1) { // answer ARP at all times
                    Frame r = new Frame();
                    RxeNet.arp(r, 2, RxeNet.arpSenderMac(c), MAC_PEER, IP_PEER, RxeNet.arpSenderMac(c), RxeNet.arpSenderIp(c));
                    peerLink.send(r);
                }
                return;
            }
            got.add(c);
        });
        a.dev.attachWire(1, l[0], IP_DEV, MAC_DEV, 1500);
        QpContext c = new QpContext();
        c.remoteAccess = remoteAccess;
        c.mtu = 3;
        c.retryCount = retry;
        c.rnrRetry = rnrRetry;
        c.minRnrTimer = 1;
        c.ackTimeout = 20; // about 4 s: the hand-driven peer answers first, also on a loaded machine
        a.qp.modify(QpCommand.RST2INIT, c);
        WirePort.mappedGid(c.rgid, IP_PEER);
        c.remoteQpn = PEER_QPN;
        c.rqPsn = PSN;
        c.sqPsn = PSN;
        a.qp.modify(QpCommand.INIT2RTR, c);
        a.qp.modify(QpCommand.RTR2RTS, c);
        return a;
    }

    /** Sends a RoCEv2 packet from the peer to the device's QP. */
    void send(Side a, int opcode, int psn, boolean ackReq, byte[] ext, byte[] payload, int qpn) {
        int pad = -payload.length & 3;
        int l4 = RxeHdr.BTH_BYTES + ext.length + payload.length + pad;
        RxeNet.roceHeaders(tx, MAC_DEV, MAC_PEER, IP_PEER, IP_DEV, 7, RxeNet.udpSport(PEER_QPN, a.qp.qpn), l4);
        RxeHdr.bth(tx.seg, RxeNet.BTH, opcode, false, pad, RxeHdr.DEFAULT_PKEY, qpn, ackReq, psn);
        MemorySegment.copy(ext, 0, tx.seg, ValueLayout.JAVA_BYTE, RxeNet.BTH + RxeHdr.BTH_BYTES, ext.length);
        MemorySegment.copy(payload, 0, tx.seg, ValueLayout.JAVA_BYTE, RxeNet.BTH + RxeHdr.BTH_BYTES + ext.length, payload.length);
        tx.seg.asSlice(RxeNet.BTH + RxeHdr.BTH_BYTES + ext.length + payload.length, pad).fill((byte) 0);
        RxeNet.seal(tx);
        peerLink.send(tx);
    }

    void send(Side a, int opcode, int psn, boolean ackReq, byte[] ext, byte[] payload) {
        send(a, opcode, psn, ackReq, ext, payload, a.qp.qpn);
    }

    /** The next packet the device sent the peer (parsed into {@code p}), or null within {@code ms}. */
    Frame next(RxePkt p, long ms) throws InterruptedException {
        Frame f = got.poll(ms, TimeUnit.MILLISECONDS);
        if (f != null) {
            assertEquals(RxeNet.ROCE, RxeNet.parse(f, p, MAC_PEER, IP_PEER), "the device's frame is RoCEv2 with a good ICRC");
        }
        return f;
    }

    static byte[] reth(long va, int rkey, int len) {
        byte[] b = new byte[16];
        MemorySegment s = MemorySegment.ofArray(b);
        RxeHdr.reth(s, 0, va, rkey, len);
        return b;
    }

    int aeth(Frame f, RxePkt p) {
        return RxeHdr.aethSyndrome(f.seg, p.hdr(RxeOpcode.AETH)) << 24 | RxeHdr.aethMsn(f.seg, p.hdr(RxeOpcode.AETH));
    }

    static final byte[] NONE = new byte[0];

    @Test
    void theResponderNaksAGapOnceAcksTheGoodAndReAcksADuplicate() throws Exception {
        Side a = deviceOnWire(7, 7);
        WirePort w = a.dev.port(1).wire();
        a.recv(a.va, 4096);
        RxePkt p = new RxePkt();
        send(a, RxeOpcode.RC_SEND_ONLY, PSN + 3, true, NONE, new byte[64]);
        Frame f = next(p, 5000);
        assertNotNull(f, "a NAK");
        assertEquals(RxeOpcode.RC_ACKNOWLEDGE, p.opcode);
        assertEquals(PSN, p.psn, "the NAK names the expected PSN");
        assertEquals(0x6000_0000, aeth(f, p), "NAK: PSN sequence error, MSN 0");
        send(a, RxeOpcode.RC_SEND_ONLY, PSN + 4, true, NONE, new byte[64]);
        assertNull(next(p, 200), "one NAK per gap");
        // a bad ICRC: silently dropped
        send(a, RxeOpcode.RC_SEND_ONLY, PSN, true, NONE, new byte[64]);
        // (resend it corrupted: flip a payload bit of the frame just built, keep the old ICRC)
        tx.seg.set(ValueLayout.JAVA_BYTE, RxeNet.BTH + 20, (byte) 1);
        peerLink.send(tx);
        f = next(p, 5000);
        assertNotNull(f, "the ACK of the good SEND");
        assertEquals(PSN, p.psn);
        assertEquals(0x1f00_0001, aeth(f, p), "ACK, credits unlimited, MSN 1");
        assertNull(next(p, 200), "nothing for the corrupted frame");
        Cqe c = WireTest.await(a);
        assertEquals(Cqe.RECV_SEND, c.opcode);
        assertEquals(64, c.byteCnt);
        // the duplicate: re-ACKed with the same PSN and MSN
        send(a, RxeOpcode.RC_SEND_ONLY, PSN, true, NONE, new byte[64]);
        f = next(p, 5000);
        assertNotNull(f);
        assertEquals(PSN, p.psn);
        assertEquals(0x1f00_0001, aeth(f, p));
        assertEquals(2, w.counters().get(RxeCounters.OUT_OF_SEQ_REQ));
        assertEquals(1, w.counters().get(RxeCounters.DUP_REQ));
        assertEquals(1, w.counters().get(RxeCounters.RCVD_ICRC_ERR));
    }

    @Test
    void noReceiveIsAnRnrNakABadRkeyARemoteAccessNakAndTheQpInErr() throws Exception {
        Side a = deviceOnWire(7, 7);
        RxePkt p = new RxePkt();
        send(a, RxeOpcode.RC_SEND_ONLY, PSN, true, NONE, new byte[16]);
        Frame f = next(p, 5000);
        assertNotNull(f);
        assertEquals(0x21, aeth(f, p) >>> 24, "RNR NAK with the QP's min_rnr_timer 1");
        assertEquals(PSN, p.psn);
        // a multi-packet SEND is NAKed at its FIRST, as rxe checks the receive queue there
        send(a, RxeOpcode.RC_SEND_FIRST, PSN, false, NONE, new byte[1024]);
        f = next(p, 5000);
        assertNotNull(f);
        assertEquals(0x21, aeth(f, p) >>> 24, "RNR NAK at the FIRST");
        assertEquals(PSN, p.psn);
        assertEquals(2, a.dev.port(1).wire().counters().get(RxeCounters.SND_RNR));
        send(a, RxeOpcode.RC_RDMA_WRITE_ONLY, PSN, true, reth(a.va, a.key + 1, 16), new byte[16]);
        f = next(p, 5000);
        assertNotNull(f);
        assertEquals(0x62, aeth(f, p) >>> 24, "NAK: remote access error");
        assertEquals(HwQpState.ERR, WireTest.awaitState(a, HwQpState.ERR));
    }

    @Test
    void aMiddleWithoutFirstAnUnalignedAtomicAndALengthBeyondTheRethAreInvalidRequests() throws Exception {
        for (int k = 0; k < 3; k++) {
            Side a = deviceOnWire(k, 7, 7);
            RxePkt p = new RxePkt();
            switch (k) {
                case 0 -> send(a, RxeOpcode.RC_SEND_MIDDLE, PSN, false, NONE, new byte[1024]);
                case 1 -> {
                    byte[] atm = new byte[28];
                    RxeHdr.atomicEth(MemorySegment.ofArray(atm), 0, a.va + 3, a.key, 1, 0);
                    send(a, RxeOpcode.RC_FETCH_ADD, PSN, true, atm, NONE);
                }
                default -> send(a, RxeOpcode.RC_RDMA_WRITE_ONLY, PSN, true, reth(a.va, a.key, 8), new byte[16]);
            }
            Frame f = next(p, 5000);
            assertNotNull(f, "case " + k);
            assertEquals(0x61, aeth(f, p) >>> 24, "NAK: invalid request (case " + k + ")");
            assertEquals(HwQpState.ERR, WireTest.awaitState(a, HwQpState.ERR));
            peerLink.close();
            a.dev.remove();
            got.clear();
        }
    }

    /**
     * A request the QP's access flags do not allow is an invalid request (rxe's {@code check_op_valid}:
     * RESPST_ERR_UNSUPPORTED_OPCODE, NAK 0x61), before its key is looked at; a key without the
     * right is a remote access error (0x62); a misaligned atomic under a bad key is the key's error
     * (rxe checks the key before the alignment). The QP goes to ERR each time.
     */
    @Test
    void anOperationTheQpDoesNotAllowIsAnInvalidRequestAKeyWithoutTheRightARemoteAccessError() throws Exception {
        int all = QpContext.BIT_RRE | QpContext.BIT_RWE | QpContext.BIT_RAE;
        int[] access = {all & ~QpContext.BIT_RWE, all & ~QpContext.BIT_RRE, all & ~QpContext.BIT_RAE, all & ~QpContext.BIT_RWE, all};
        int[] want = {0x61, 0x61, 0x61, 0x61, 0x62};
        for (int k = 0; k < access.length; k++) {
            Side a = deviceOnWire(k, 7, 7, access[k]);
            RxePkt p = new RxePkt();
            byte[] atm = new byte[28];
            switch (k) {
                case 0 -> send(a, RxeOpcode.RC_RDMA_WRITE_ONLY, PSN, true, reth(a.va, a.key, 16), new byte[16]);
                case 1 -> send(a, RxeOpcode.RC_RDMA_READ_REQUEST, PSN, false, reth(a.va, a.key, 16), NONE);
                case 2 -> {
                    RxeHdr.atomicEth(MemorySegment.ofArray(atm), 0, a.va, a.key, 1, 0);
                    send(a, RxeOpcode.RC_FETCH_ADD, PSN, true, atm, NONE);
                }
                case 3 -> send(a, RxeOpcode.RC_RDMA_WRITE_ONLY, PSN, true, reth(a.va, a.key + 1, 16), new byte[16]); // bad key too
                default -> {
                    RxeHdr.atomicEth(MemorySegment.ofArray(atm), 0, a.va + 3, a.key + 1, 1, 0);
                    send(a, RxeOpcode.RC_FETCH_ADD, PSN, true, atm, NONE);
                }
            }
            Frame f = next(p, 5000);
            assertNotNull(f, "case " + k);
            assertEquals(RxeOpcode.RC_ACKNOWLEDGE, p.opcode, "case " + k);
            assertEquals(PSN, p.psn, "case " + k);
            assertEquals(want[k], aeth(f, p) >>> 24, "NAK syndrome (case " + k + ")");
            assertEquals(HwQpState.ERR, WireTest.awaitState(a, HwQpState.ERR));
            peerLink.close();
            a.dev.remove();
            got.clear();
        }
    }

    @Test
    void garbageWrongQpnsUnrequestedResponsesGhostAcksAndAFloodAreCountedDrops() throws Exception {
        Side a = deviceOnWire(7, 7);
        WirePort w = a.dev.port(1).wire();
        RxePkt p = new RxePkt();
        SplittableRandom rnd = new SplittableRandom(3);
        Frame g = new Frame();
        for (int i = 0; i < 5000; i++) {
            // random bytes, then truncations of a good frame, then frames with our addresses and random rest
            int len = rnd.nextInt(1, 1600);
            for (int j = 0; j < len; j++) {
                g.seg.set(ValueLayout.JAVA_BYTE, j, (byte) rnd.nextInt());
            }
            g.len = len;
            if (i % 3 == 1) {
                send(a, RxeOpcode.RC_SEND_ONLY, PSN + 1000, true, NONE, new byte[64]);
                g.copyFrom(tx);
                g.len = rnd.nextInt(1, tx.len);
            } else if (i % 3 == 2) {
                RxeNet.roceHeaders(g, MAC_DEV, MAC_PEER, IP_PEER, IP_DEV, i, 0xc000, 200);
                g.seg.set(ValueLayout.JAVA_BYTE, RxeNet.BTH, (byte) rnd.nextInt());
                RxeNet.seal(g);
            }
            peerLink.send(g);
        }
        send(a, RxeOpcode.RC_SEND_ONLY, PSN, true, NONE, new byte[8], 0x777); // no such QP
        send(a, RxeOpcode.RC_RDMA_READ_RESPONSE_ONLY, PSN, false, new byte[4], new byte[32]); // never requested
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN + 77, false, new byte[] {0x1f, 0, 0, 1}, NONE); // a ghost ACK
        send(a, RxeOpcode.RC_SEND_ONLY, PSN + 0x7FFFF0, true, NONE, new byte[8]); // PSN far ahead: one sequence NAK
        // the port still works: a good SEND after it all is ACKed
        a.recv(a.va, 4096);
        send(a, RxeOpcode.RC_SEND_ONLY, PSN, true, NONE, new byte[32]);
        Frame f;
        int acks = 0;
        int naks = 0;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (acks == 0 && System.nanoTime() < deadline) {
            f = next(p, 1000);
            if (f == null) {
                continue;
            }
            if (aeth(f, p) >>> 24 == 0x60) {
                naks++;
            } else if (aeth(f, p) >>> 24 == 0x1f && p.psn == PSN) {
                acks++;
            }
        }
        assertEquals(1, acks, "the good SEND is ACKed after the flood");
        assertTrue(naks >= 1, "the far PSN got its sequence NAK");
        assertEquals(Cqe.RECV_SEND, WireTest.await(a).opcode);
        var s = w.counters().snapshot();
        long dropped = s.get("rcvd_icrc_err") + s.get("rcvd_malformed") + s.get("rcvd_unknown_opcode") + s.get("rcvd_no_qp")
                + s.get("rcvd_bad_header") + s.get("rcvd_unexpected_ack");
        assertTrue(dropped >= 3000, "the garbage was counted: " + s);
        assertTrue(s.get("rcvd_no_qp") >= 1 && s.get("rcvd_unexpected_ack") >= 2, s.toString());
        assertEquals(HwQpState.RTS, a.qp.state(), "nothing of it moved the QP");
        assertEquals(0, a.dev.engineFailures());
    }

    @Test
    void theRequesterBacksOffOnRnrNaksThenEndsInRnrRetryExceeded() throws Exception {
        Side a = deviceOnWire(2, 7);
        RxePkt p = new RxePkt();
        a.wqe(Wqe.OP_SEND, a.va, 100);
        a.ring();
        for (int i = 0; i < 3; i++) {
            Frame f = next(p, 5000);
            assertNotNull(f, "try " + i);
            assertEquals(RxeOpcode.RC_SEND_ONLY, p.opcode);
            assertEquals(PSN, p.psn);
            send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN, false, new byte[] {0x21, 0, 0, 0}, NONE, a.qp.qpn);
        }
        Cqe c = WireTest.await(a);
        assertEquals(Cqe.SYNDROME_RNR_RETRY_EXC_ERR, c.syndrome, "rnr_retry 2: the first try and two retries");
        assertEquals(3, a.dev.port(1).wire().counters().get(RxeCounters.RCV_RNR));
        assertEquals(1, a.dev.port(1).wire().counters().get(RxeCounters.RNR_RETRY_EXCEEDED), "retry_rnr_exceeded_err");
    }

    @Test
    void aSequenceNakResendsFromItsPsnAndTheLastAckCompletes() throws Exception {
        Side a = deviceOnWire(7, 7);
        RxePkt p = new RxePkt();
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 3000); // three packets
        w.remoteAddr = 0x1000;
        w.rkey = 0x42;
        a.ring();
        int[] seen = new int[3];
        for (int i = 0; i < 3; i++) {
            assertNotNull(next(p, 5000));
            seen[i] = p.opcode;
        }
        assertEquals(RxeOpcode.RC_RDMA_WRITE_FIRST, seen[0]);
        assertEquals(RxeOpcode.RC_RDMA_WRITE_MIDDLE, seen[1]);
        assertEquals(RxeOpcode.RC_RDMA_WRITE_LAST, seen[2]);
        // the peer lost the MIDDLE: NAK PSN sequence error at PSN+1
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN + 1, false, new byte[] {0x60, 0, 0, 0}, NONE);
        assertNotNull(next(p, 5000));
        assertEquals(RxeOpcode.RC_RDMA_WRITE_MIDDLE, p.opcode, "go-back-N from the NAK's PSN, not the message's start");
        assertEquals(PSN + 1, p.psn);
        assertNotNull(next(p, 5000));
        assertEquals(PSN + 2, p.psn);
        // a ghost ACK for a PSN not in flight changes nothing; then the real one
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN + 40, false, new byte[] {0x1f, 0, 0, 1}, NONE);
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN + 2, false, new byte[] {0x1f, 0, 0, 1}, NONE);
        Cqe c = WireTest.await(a);
        assertEquals(0, c.syndrome);
        assertEquals(Wqe.OP_RDMA_WRITE, c.opcode);
        assertEquals(1, a.dev.port(1).wire().counters().get(RxeCounters.RCV_SEQ_ERR));
    }

    @Test
    void aNakWithARemoteAccessErrorFailsTheWqe() throws Exception {
        Side a = deviceOnWire(7, 7);
        RxePkt p = new RxePkt();
        SendWqe w = a.wqe(Wqe.OP_RDMA_READ, a.va, 64);
        w.remoteAddr = 0x1000;
        w.rkey = 0x42;
        a.ring();
        assertNotNull(next(p, 5000));
        assertEquals(RxeOpcode.RC_RDMA_READ_REQUEST, p.opcode);
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN, false, new byte[] {0x62, 0, 0, 0}, NONE);
        Cqe c = WireTest.await(a);
        assertEquals(Cqe.SYNDROME_REMOTE_ACCESS_ERR, c.syndrome);
        // the error CQE is written before the QP moves to ERR (rxe_comp.c: do_complete, then rxe_qp_error): awaited
        assertEquals(HwQpState.ERR, WireTest.awaitState(a, HwQpState.ERR));
    }

    /** Posts {@code n} WQEs made by {@code make} and rings once: the window sends them together. */
    private static void postAll(Side a, int n, java.util.function.IntConsumer make) {
        for (int k = 0; k < n; k++) {
            make.accept(k);
            a.sqPi++;
        }
        a.qp.sqDoorbellRecord(a.sqPi);
        a.qp.ringSqDoorbell();
    }

    @Test
    void anRnrNakInsideTheWindowCompletesWhatCameBeforeAndResendsTheRestAfterTheTimer() throws Exception {
        Side a = deviceOnWire(7, 7);
        RxePkt p = new RxePkt();
        postAll(a, 3, k -> a.wqe(Wqe.OP_SEND, a.va + 100L * k, 100));
        for (int k = 0; k < 3; k++) {
            assertNotNull(next(p, 5000), "SEND " + k + " is in flight before any ACK");
            assertEquals(PSN + k, p.psn);
        }
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN, false, new byte[] {0x1f, 0, 0, 1}, NONE);
        // RNR NAK with timer 26 (82 ms: the NAK after it surely comes during the back-off)
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN + 1, false, new byte[] {0x3a, 0, 0, 1}, NONE);
        // the responder's sequence NAK of the SEND after it (at the PSN it still expects): ignored, the back-off resends anyway
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN + 1, false, new byte[] {0x60, 0, 0, 1}, NONE);
        Cqe c = WireTest.await(a);
        assertEquals(0, c.syndrome, "the SEND before the RNR NAK completes");
        for (int k = 1; k < 3; k++) {
            assertNotNull(next(p, 5000), "resent after the back-off");
            assertEquals(PSN + k, p.psn, "from the NAKed PSN on");
        }
        assertNull(next(p, 200), "the sequence NAK after the RNR NAK resent nothing more");
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN + 2, false, new byte[] {0x1f, 0, 0, 3}, NONE); // one ACK for both
        for (int k = 1; k < 3; k++) {
            c = WireTest.await(a);
            assertEquals(0, c.syndrome, "WQE " + k);
            assertEquals(k, c.wqeIndex);
        }
        assertEquals(1, a.dev.port(1).wire().counters().get(RxeCounters.RCV_RNR));
        assertEquals(0, a.dev.port(1).wire().counters().get(RxeCounters.COMP_RETRY), "an RNR resend is no retry of retry_cnt");
    }

    @Test
    void anAckPastAReadStillWaitingForItsDataIsAnImpliedNak() throws Exception {
        Side a = deviceOnWire(7, 7);
        RxePkt p = new RxePkt();
        postAll(a, 2, k -> {
            SendWqe w = a.wqe(k == 0 ? Wqe.OP_RDMA_READ : Wqe.OP_SEND, a.va + 4096L * k, 64);
            w.remoteAddr = 0x1000;
            w.rkey = 0x42;
        });
        assertNotNull(next(p, 5000));
        assertEquals(RxeOpcode.RC_RDMA_READ_REQUEST, p.opcode);
        assertNotNull(next(p, 5000));
        assertEquals(RxeOpcode.RC_SEND_ONLY, p.opcode);
        assertEquals(PSN + 1, p.psn);
        // the READ's response was lost: the SEND's ACK comes first
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN + 1, false, new byte[] {0x1f, 0, 0, 2}, NONE);
        assertNotNull(next(p, 5000), "the READ goes again at once");
        assertEquals(RxeOpcode.RC_RDMA_READ_REQUEST, p.opcode);
        assertEquals(PSN, p.psn);
        assertNotNull(next(p, 5000), "go-back-N: the SEND after it too");
        assertEquals(PSN + 1, p.psn);
        byte[] data = new byte[64];
        java.util.Arrays.fill(data, (byte) 0x5a);
        send(a, RxeOpcode.RC_RDMA_READ_RESPONSE_ONLY, PSN, false, new byte[] {0x1f, 0, 0, 1}, data);
        send(a, RxeOpcode.RC_ACKNOWLEDGE, PSN + 1, false, new byte[] {0x1f, 0, 0, 2}, NONE);
        Cqe c = WireTest.await(a);
        assertEquals(0, c.syndrome);
        assertEquals(Wqe.OP_RDMA_READ, c.opcode);
        byte[] got = new byte[64];
        proc.read(a.va, got, 0, 64);
        assertEquals(java.util.Arrays.toString(data), java.util.Arrays.toString(got), "the READ's data placed");
        c = WireTest.await(a);
        assertEquals(0, c.syndrome);
        assertEquals(Wqe.OP_SEND, c.opcode);
        assertEquals(1, a.dev.port(1).wire().counters().get(RxeCounters.COMP_RETRY), "the implied NAK was one retry");
    }

    /**
     * Two atomics in flight, then the first again (its ACK lost, the requester's go-back-N resend):
     * answered from its saved result, nothing executed twice (rxe's responder resources; one saved
     * atomic left the first unanswered for ever). A FLUSH (FETH then RETH) is answered with a
     * zero-length READ RESPONSE ONLY and its duplicate the same, flushing nothing again; a placement
     * type the QP does not take is NAK 0x61 (rxe's RESPST_ERR_UNSUPPORTED_OPCODE).
     */
    @Test
    void duplicateAtomicsAndFlushesAreAnsweredAsRxeAnswersThem() throws Exception {
        Side a = deviceOnWire(0, 7, 7, QpContext.BIT_RRE | QpContext.BIT_RWE | QpContext.BIT_RAE | QpContext.BIT_FLUSH_GLOBAL);
        int flushKey = a.dev.sw2hwMpt(1, a.va, 1 << 16, ALL | HcaDevice.PERM_FLUSH_GLOBAL, new long[] {a.iova}, new long[] {1L << 16});
        RxePkt p = new RxePkt();
        long before = proc.readLong(a.va + 64);
        for (int k = 0; k < 3; k++) {
            byte[] atm = new byte[28];
            RxeHdr.atomicEth(MemorySegment.ofArray(atm), 0, a.va + 64, a.key, k == 1 ? 7 : 5, 0);
            send(a, RxeOpcode.RC_FETCH_ADD, PSN + (k == 2 ? 0 : k), true, atm, NONE); // the third is the first again
            Frame f = next(p, 5000);
            assertNotNull(f, "atomic " + k + " answered");
            assertEquals(RxeOpcode.RC_ATOMIC_ACKNOWLEDGE, p.opcode);
            assertEquals(PSN + (k == 2 ? 0 : k), p.psn);
            assertEquals(before + (k == 1 ? 5 : 0), RxeHdr.atmAckOrig(f.seg, p.hdr(RxeOpcode.ATMACK)), "atomic " + k + "'s original value");
        }
        assertEquals(before + 12, proc.readLong(a.va + 64), "each atomic executed once");
        byte[] fr = new byte[RxeHdr.FETH_BYTES + RxeHdr.RETH_BYTES];
        RxeHdr.feth(MemorySegment.ofArray(fr), 0, Wqe.FLUSH_GLOBAL, Wqe.FLUSH_RANGE);
        RxeHdr.reth(MemorySegment.ofArray(fr), RxeHdr.FETH_BYTES, a.va, flushKey, 4096);
        for (int k = 0; k < 2; k++) {
            send(a, RxeOpcode.RC_FLUSH, PSN + 2, true, fr, NONE); // the second is a duplicate
            Frame f = next(p, 5000);
            assertNotNull(f, "FLUSH " + k + " answered");
            assertEquals(RxeOpcode.RC_RDMA_READ_RESPONSE_ONLY, p.opcode);
            assertEquals(0, p.payloadLen);
            assertEquals(PSN + 2, p.psn);
            assertEquals(0x1f00_0003, aeth(f, p), "ACK, credits unlimited, MSN 3");
        }
        assertEquals(2, a.dev.port(1).wire().counters().get(RxeCounters.DUP_REQ), "the atomic's and the FLUSH's duplicates");
        RxeHdr.feth(MemorySegment.ofArray(fr), 0, Wqe.FLUSH_PERSISTENT, Wqe.FLUSH_RANGE);
        send(a, RxeOpcode.RC_FLUSH, PSN + 3, true, fr, NONE);
        Frame f = next(p, 5000);
        assertNotNull(f);
        assertEquals(0x61, aeth(f, p) >>> 24, "a type the QP does not take: NAK invalid request");
        assertEquals(HwQpState.ERR, WireTest.awaitState(a, HwQpState.ERR));
    }
}
