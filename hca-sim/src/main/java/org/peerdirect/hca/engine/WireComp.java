package org.peerdirect.hca.engine;

import org.peerdirect.hca.wire.Frame;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeHdr;
import org.peerdirect.hca.wire.RxeOpcode;
import org.peerdirect.hca.wire.RxePkt;

/**
 * The completer of a QP on a wire ({@code rxe_comp.c}): matches an acknowledgement, a READ
 * response or an atomic acknowledgement against the WQE in flight ({@code check_psn},
 * {@code check_ack}), places READ data and atomic results into the WQE's local buffers
 * ({@code do_read}, {@code do_atomic}), and posts the verdict to the {@link WireReq}: the WQE
 * done, an RNR NAK (back off, resend), a PSN sequence NAK (resend from its PSN), or the NAK's
 * error. A packet that matches no WQE in flight (a ghost or late ACK, a READ response never
 * requested) is dropped and counted.
 *
 * <p>Runs on the link's receive thread; the drain of the requester is stalled or about to look
 * at the posted fields (they are volatile; the doorbell after them wakes it).
 */
final class WireComp {

    private WireComp() {
    }

    static void receive(WirePort port, HwQp qp, Frame f, RxePkt p) {
        WireReq wr = qp.requester.wire;
        long h = wr == null ? -1 : wr.inflight;
        if (h < 0) {
            port.counters.inc(RxeCounters.RCVD_GHOST);
            return;
        }
        int first = wr.firstPsn;
        int n = wr.npkts;
        int idx = RxeHdr.psnCompare(p.psn, first);
        boolean reads = Wqe.readsResponse(wr.opcode);
        if (idx < 0 || idx >= n) {
            port.counters.inc(RxeCounters.RCVD_GHOST); // an ACK for a PSN not in flight: ignored as rxe's check_psn does
            return;
        }
        if (p.opcode == RxeOpcode.RC_ACKNOWLEDGE) {
            ack(port, qp, wr, h, f, p, idx, reads);
            return;
        }
        if (p.opcode == RxeOpcode.RC_ATOMIC_ACKNOWLEDGE) {
            if (!Wqe.isAtomic(wr.opcode)) {
                port.counters.inc(RxeCounters.RCVD_GHOST); // an atomic ACK for a request that was no atomic
                return;
            }
            int syn = RxeHdr.aethSyndrome(f.seg, p.hdr(RxeOpcode.AETH));
            if ((syn & RxeHdr.AETH_TYPE_MASK) != RxeHdr.AETH_ACK) {
                post(qp, wr, h, Outcome.REM_OP_ERR); // an atomic ACK carries an ACK syndrome: a bad response
                return;
            }
            long orig = RxeHdr.atmAckOrig(f.seg, p.hdr(RxeOpcode.ATMACK));
            req(qp).scratchForComp.set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0, orig);
            post(qp, wr, h, place(qp, wr, h, req(qp).scratchForComp, 0, 8, true));
            return;
        }
        // a READ response
        if (wr.opcode != Wqe.OP_RDMA_READ) {
            port.counters.inc(RxeCounters.RCVD_GHOST); // READ response data nobody asked for
            return;
        }
        int next = wr.compNext;
        if (idx != next) {
            if (idx > next && wr.readRetryFrom != next) {
                // a response missing: rxe's completer retries the READ from it at once (COMPST_ERROR_RETRY), once per gap
                port.counters.inc(RxeCounters.RCV_SEQ_ERR);
                wr.readRetryFrom = next;
                wr.postResend(h, next);
                wake(qp);
            }
            return; // later responses of the gap, or a duplicate: dropped
        }
        int mtu = Math.min(qp.mtu, port.activeMtu);
        boolean last = p.has(RxeOpcode.END);
        SendWqe w = qp.sqSlot(h);
        long expect = last ? w.length - (long) idx * mtu : mtu;
        if (p.payloadLen != expect || last != (idx == n - 1)) {
            post(qp, wr, h, Outcome.REM_OP_ERR); // a response of the wrong size: a bad response (rxe's COMPST_ERROR)
            return;
        }
        Outcome o = place(qp, wr, h, f.seg, p.payload, p.payloadLen, idx == 0);
        if (o != Outcome.SUCCESS) {
            post(qp, wr, h, o);
            return;
        }
        wr.compNext = idx + 1;
        if (last) {
            post(qp, wr, h, Outcome.SUCCESS);
        }
    }

    private static Requester req(HwQp qp) {
        return qp.requester;
    }

    /** An ACKNOWLEDGE: its AETH's syndrome says ACK, RNR NAK or NAK ({@code check_ack}). */
    private static void ack(WirePort port, HwQp qp, WireReq wr, long h, Frame f, RxePkt p, int idx, boolean reads) {
        int syn = RxeHdr.aethSyndrome(f.seg, p.hdr(RxeOpcode.AETH));
        switch (syn & RxeHdr.AETH_TYPE_MASK) {
            case RxeHdr.AETH_ACK -> {
                // a READ or atomic completes with its data; an ACK of its PSN before that is coalesced progress
                if (!reads && idx == wr.npkts - 1) {
                    post(qp, wr, h, Outcome.SUCCESS);
                }
            }
            case RxeHdr.AETH_RNR_NAK -> {
                port.counters.inc(RxeCounters.RCV_RNR);
                wr.rnrTimer = syn & 0x1F;
                wr.postResend(h, idx);
                post(qp, wr, h, Outcome.RNR_NAK);
            }
            case RxeHdr.AETH_NAK -> {
                switch (syn) {
                    case RxeHdr.AETH_NAK_PSN_SEQ_ERROR -> {
                        port.counters.inc(RxeCounters.RCV_SEQ_ERR);
                        wr.postResend(h, idx);
                        wake(qp);
                    }
                    case RxeHdr.AETH_NAK_INVALID_REQ, RxeHdr.AETH_NAK_INV_RD_REQ -> post(qp, wr, h, Outcome.REM_INV_REQ_ERR);
                    case RxeHdr.AETH_NAK_REM_ACC_ERR -> post(qp, wr, h, Outcome.REM_ACCESS_ERR);
                    default -> post(qp, wr, h, Outcome.REM_OP_ERR);
                }
            }
            default -> port.counters.inc(RxeCounters.RCVD_BAD_HDR); // reserved syndrome type
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

    private static void post(HwQp qp, WireReq wr, long h, Outcome o) {
        wr.post(h, o);
        wake(qp);
    }

    /** The verdict is posted: the stalled drain runs again (a volatile write before the doorbell's, see {@link Requester#awaitAck}). */
    private static void wake(HwQp qp) {
        qp.requester.wake();
    }
}
