package org.peerdirect.hca.engine;

import org.peerdirect.hca.wire.Frame;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeHdr;
import org.peerdirect.hca.wire.RxeOpcode;
import org.peerdirect.hca.wire.RxePkt;

/**
 * The completer of a QP on a wire ({@code rxe_comp.c}): matches an acknowledgement, a READ
 * response or an atomic acknowledgement against the {@link WireReq} send window's head
 * ({@code check_psn}, {@code check_ack}): a packet past a WQE's last PSN completes it (a coalesced
 * ACK) or, for a READ or atomic still waiting for its data, is an implied NAK; it places READ data
 * and atomic results into the WQE's local buffers ({@code do_read}, {@code do_atomic}); and posts
 * what the head needs: an RNR NAK's back-off and resend, a resend from a PSN sequence NAK's PSN or a
 * missing READ response, a NAK's error. A packet that matches nothing sent (a ghost or late ACK, a
 * READ response never requested) is dropped and counted; a duplicate of one already taken is
 * dropped.
 *
 * <p>Runs on the link's receive thread, under the window's monitor; the drain is woken
 * ({@link Requester#wake}) after it is released, when the head completed or has a verdict.
 */
final class WireComp {

    private WireComp() {
    }

    static void receive(WirePort port, HwQp qp, Frame f, RxePkt p) {
        WireReq wr = qp.requester.wire;
        if (wr == null) {
            port.counters.inc(RxeCounters.RCVD_GHOST);
            return;
        }
        boolean wake;
        synchronized (wr) {
            wake = complete(port, qp, wr, f, p);
        }
        if (wake) {
            qp.requester.wake(); // the verdict is written (under the monitor) before the doorbell: see Requester#awaitAck
        }
    }

    /** {@code rxe_completer} for one packet; true when the drain must run (a WQE completed, a verdict posted). */
    private static boolean complete(WirePort port, HwQp qp, WireReq wr, Frame f, RxePkt p) {
        assert Thread.holdsLock(wr);
        if (wr.doneTo == wr.sendNext || RxeHdr.psnCompare(p.psn, wr.nextPsn) >= 0 || wr.error != null) {
            port.counters.inc(RxeCounters.RCVD_GHOST); // for no PSN sent (or after the head failed): ignored as rxe's check_psn does
            return false;
        }
        boolean done = false;
        // check_psn: every WQE the packet's PSN is past is acknowledged (coalesced), unless it waits for data
        for (;;) {
            int s = (int) wr.doneTo & MASK;
            int last = (wr.first[s] + wr.npk[s] - 1) & RxeHdr.PSN_MASK;
            if (RxeHdr.psnCompare(p.psn, last) <= 0) {
                break;
            }
            if (WireReq.awaitsResponse(wr.ops[s])) {
                // a READ, atomic or FLUSH whose response is missing while later PSNs are answered: an implied NAK
                return resend(wr, RxeHdr.psnCompare(wr.compPsn, wr.first[s])) || done;
            }
            advance(wr, last);
            done = true;
        }
        if (RxeHdr.psnCompare(p.psn, wr.compPsn) < 0) {
            return done; // a duplicate of what was taken (an ACK again, a READ response again): dropped
        }
        long h = wr.doneTo;
        int s = (int) h & MASK;
        int idx = RxeHdr.psnCompare(p.psn, wr.first[s]);
        int op = wr.ops[s];
        // an XRC initiator is answered in the XRC block (IB_OPCODE_XRC_ACKNOWLEDGE, ...): the same operation
        int code = RxeOpcode.rcOf(p.opcode);
        if (code == RxeOpcode.RC_ACKNOWLEDGE) {
            return ack(port, wr, f, p, idx, op) || done;
        }
        if (code == RxeOpcode.RC_RDMA_READ_RESPONSE_ONLY && (op == Wqe.OP_FLUSH || op == Wqe.OP_ATOMIC_WRITE)) {
            return readResponseAck(port, wr, f, p, idx) || done;
        }
        if (code == RxeOpcode.RC_ATOMIC_ACKNOWLEDGE) {
            if (!Wqe.isAtomic(op) || idx != 0) {
                port.counters.inc(RxeCounters.RCVD_GHOST); // an atomic ACK for a request that was no atomic
                return done;
            }
            int syn = RxeHdr.aethSyndrome(f.seg, p.hdr(RxeOpcode.AETH));
            if ((syn & RxeHdr.AETH_TYPE_MASK) != RxeHdr.AETH_ACK) {
                return fail(wr, Outcome.REM_OP_ERR); // an atomic ACK carries an ACK syndrome: a bad response
            }
            long orig = RxeHdr.atmAckOrig(f.seg, p.hdr(RxeOpcode.ATMACK));
            qp.requester.scratchForComp.set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0, orig);
            Outcome o = place(qp, wr, h, qp.requester.scratchForComp, 0, 8, true);
            if (o != Outcome.SUCCESS) {
                return fail(wr, o);
            }
            advance(wr, p.psn);
            return true;
        }
        return readResponse(port, qp, wr, f, p, h, idx, code) || done;
    }

    /**
     * The zero-length READ RESPONSE ONLY that answers a FLUSH or an ATOMIC WRITE (rxe's
     * {@code send_read_response_ack}; {@code check_ack} takes it as the WQE's completion). One
     * with data, or a NAK syndrome, is a bad response.
     */
    private static boolean readResponseAck(WirePort port, WireReq wr, Frame f, RxePkt p, int idx) {
        if (idx != 0) {
            port.counters.inc(RxeCounters.RCVD_GHOST);
            return false;
        }
        int syn = RxeHdr.aethSyndrome(f.seg, p.hdr(RxeOpcode.AETH));
        if ((syn & RxeHdr.AETH_TYPE_MASK) != RxeHdr.AETH_ACK || p.payloadLen != 0) {
            return fail(wr, Outcome.REM_OP_ERR);
        }
        advance(wr, p.psn);
        return true;
    }

    /** A READ response for the head ({@code do_read}): placed in PSN order; a gap retries the READ from it. */
    private static boolean readResponse(WirePort port, HwQp qp, WireReq wr, Frame f, RxePkt p, long h, int idx, int code) {
        int s = (int) h & MASK;
        if (wr.ops[s] != Wqe.OP_RDMA_READ) {
            port.counters.inc(RxeCounters.RCVD_GHOST); // READ response data nobody asked for
            return false;
        }
        if (p.psn != wr.compPsn) {
            // a response missing: rxe's completer retries the READ from it at once (COMPST_ERROR_RETRY), once per gap
            if (RxeHdr.psnCompare(wr.compPsn, wr.lastResendPsn) != 0) {
                port.counters.inc(RxeCounters.RCV_SEQ_ERR);
                port.port.counters.inc(PortCounters.PACKET_SEQ_ERR);
            }
            return resend(wr, RxeHdr.psnCompare(wr.compPsn, wr.first[s]));
        }
        if (code == RxeOpcode.RC_RDMA_READ_RESPONSE_MIDDLE) {
            port.counters.inc(RxeCounters.ACK_DEFERRED); // rxe defers a MIDDLE to its completer task (rxe_comp_queue_pkt's must_sched)
        }
        int mtu = Math.min(qp.mtu, port.activeMtu);
        boolean last = p.has(RxeOpcode.END);
        SendWqe w = qp.sqSlot(h);
        long expect = last ? w.length - (long) idx * mtu : mtu;
        if (p.payloadLen != expect || last != (idx == wr.npk[s] - 1)) {
            return fail(wr, Outcome.REM_OP_ERR); // a response of the wrong size: a bad response (rxe's COMPST_ERROR)
        }
        Outcome o = place(qp, wr, h, f.seg, p.payload, p.payloadLen, idx == 0);
        if (o != Outcome.SUCCESS) {
            return fail(wr, o);
        }
        if (last) {
            advance(wr, p.psn);
            return true;
        }
        wr.compPsn = (p.psn + 1) & RxeHdr.PSN_MASK;
        wr.progressAt = System.nanoTime();
        return false;
    }

    private static final int MASK = WireReq.SLOTS - 1; // a WQE's slot in the window

    /** The head WQE, whose last PSN is {@code last}, is complete: the window moves on. */
    private static void advance(WireReq wr, int last) {
        wr.doneTo++;
        wr.compPsn = (last + 1) & RxeHdr.PSN_MASK;
        wr.progressAt = System.nanoTime();
        wr.news++;
    }

    /** The head is to be resent from packet {@code k}; false when that was asked already for this gap. */
    private static boolean resend(WireReq wr, int k) {
        int s = (int) wr.doneTo & MASK;
        int psn = (wr.first[s] + k) & RxeHdr.PSN_MASK;
        if (wr.rnr || psn == wr.lastResendPsn) {
            return false; // an RNR back-off resends anyway; one resend per gap (the timeout covers a lost one)
        }
        wr.lastResendPsn = psn;
        wr.resendPkt = k;
        wr.news++;
        return true;
    }

    private static boolean fail(WireReq wr, Outcome o) {
        wr.error = o;
        wr.news++;
        return true;
    }

    /** An ACKNOWLEDGE at packet {@code idx} of the head: its AETH's syndrome says ACK, RNR NAK or NAK ({@code check_ack}). */
    private static boolean ack(WirePort port, WireReq wr, Frame f, RxePkt p, int idx, int op) {
        int syn = RxeHdr.aethSyndrome(f.seg, p.hdr(RxeOpcode.AETH));
        int s = (int) wr.doneTo & MASK;
        switch (syn & RxeHdr.AETH_TYPE_MASK) {
            case RxeHdr.AETH_ACK -> {
                // a READ, atomic or FLUSH completes with its response; an ACK of its PSN before that is no progress
                if (WireReq.awaitsResponse(op)) {
                    return false;
                }
                if (idx == wr.npk[s] - 1) {
                    advance(wr, p.psn);
                    return true;
                }
                wr.compPsn = (p.psn + 1) & RxeHdr.PSN_MASK; // a part of a long message acknowledged
                wr.progressAt = System.nanoTime();
                return false;
            }
            case RxeHdr.AETH_RNR_NAK -> {
                if (wr.rnr) {
                    return false; // already backing off
                }
                port.counters.inc(RxeCounters.RCV_RNR);
                port.port.counters.inc(PortCounters.RNR_NAK_RCVD);
                wr.rnrTimer = syn & 0x1F;
                wr.rnr = true;
                wr.resendPkt = idx;
                wr.compPsn = p.psn; // a NAK acknowledges what came before it
                wr.news++;
                return true;
            }
            case RxeHdr.AETH_NAK -> {
                switch (syn) {
                    case RxeHdr.AETH_NAK_PSN_SEQ_ERROR -> {
                        if (wr.rnr) {
                            return false; // the packets after an RNR NAK's PSN: resent after the back-off
                        }
                        port.counters.inc(RxeCounters.RCV_SEQ_ERR);
                port.port.counters.inc(PortCounters.PACKET_SEQ_ERR);
                        wr.compPsn = p.psn;
                        return resend(wr, idx);
                    }
                    case RxeHdr.AETH_NAK_INVALID_REQ, RxeHdr.AETH_NAK_INV_RD_REQ -> {
                        return fail(wr, Outcome.REM_INV_REQ_ERR);
                    }
                    case RxeHdr.AETH_NAK_REM_ACC_ERR -> {
                        return fail(wr, Outcome.REM_ACCESS_ERR);
                    }
                    default -> {
                        return fail(wr, Outcome.REM_OP_ERR);
                    }
                }
            }
            default -> {
                port.counters.inc(RxeCounters.RCVD_BAD_HDR); // reserved syndrome type
                return false;
            }
        }
    }

    /**
     * Places {@code len} bytes of {@code src} at {@code off} into the WQE's local segments, the
     * cursor admitted at the first piece and advancing across calls.
     */
    private static Outcome place(HwQp qp, WireReq wr, long h, java.lang.foreign.MemorySegment src, long off, long len, boolean first) {
        Segs dst = wr.compLocal;
        SendWqe w = qp.sqSlot(h);
        if (first) {
            dst.reset(qp.dev);
            for (int i = 0; i < w.numSge; i++) {
                long l = w.byteCount[i] & 0xFFFF_FFFFL;
                if (l == 0) {
                    continue;
                }
                Mpt m = qp.dev.mpt(w.lkey[i]);
                int g = m == null ? -1 : m.admit(qp.pdn, w.addr[i], l, HcaDevice.PERM_LOCAL_WRITE);
                if (g < 0) {
                    return Outcome.LOC_PROT_ERR;
                }
                dst.add(m, w.addr[i], l, g);
            }
        }
        if (len == 0) {
            return Outcome.SUCCESS;
        }
        Segs s = qp.requester.compSrc.reset(qp.dev).inline(src, off, len);
        Outcome o = DmaMover.move(s, dst, len, Outcome.LOC_PROT_ERR, Outcome.LOC_PROT_ERR);
        // a missing on-demand page of the requester's buffer: not served on this path (stated in WireReq's notes)
        return o == null ? Outcome.SUCCESS : o == Outcome.PAGE_FAULT ? Outcome.LOC_PROT_ERR : o;
    }
}
