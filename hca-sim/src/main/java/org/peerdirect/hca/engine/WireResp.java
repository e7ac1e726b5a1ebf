package org.peerdirect.hca.engine;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.wire.Frame;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeHdr;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.RxeOpcode;
import org.peerdirect.hca.wire.RxePkt;

/**
 * The responder of a QP on a wire ({@code rxe_resp.c}): takes request packets in PSN order
 * ({@code check_psn}: one NAK per sequence error, duplicates re-acknowledged or, for READ,
 * answered again), checks the opcode sequence and the lengths ({@code check_op_seq},
 * {@code rxe_resp_check_length}), executes the message through the engine's {@link Responder}
 * (the same rkey, access, receive-WQE and completion rules as in one JVM), and answers: ACK
 * (credit "unlimited" and the MSN), RNR NAK with the QP's timer, NAK (invalid request, remote
 * access, remote operational error), READ responses, atomic ACKs; a FLUSH is served as the
 * fabric serves it and answered with a zero-length READ RESPONSE ONLY, as rxe's
 * {@code process_flush} and {@code send_read_response_ack}.
 *
 * <p>At an XRC target QP every request carries an XRCETH naming an XRC SRQ: one of the target's
 * XRC domain receives its SENDs and its PD checks its rkeys ({@link Responder}); a request naming
 * another domain's SRQ, a basic SRQ or none is dropped before the transport looks at it (counted
 * as a bad header), as on the fabric, so the requester retries and ends in RETRY_EXC_ERR. The
 * target answers in the XRC opcode block ({@code IB_OPCODE_XRC_ACKNOWLEDGE}, ...).
 *
 * <p>A SEND's payload is staged until its last packet and delivered then (rxe places each packet
 * as it comes); an RDMA WRITE is placed packet by packet. Runs on the link's receive thread, one
 * packet at a time, so the per-QP {@link State} needs no lock.
 */
final class WireResp {

    /**
     * Atomic results remembered for duplicates: as many as WQEs a requester of this engine keeps
     * in flight ({@link WireReq#SLOTS}), so any max_rd_atomic (up to 128 in the QP contexts) is covered.
     */
    static final int ATOMIC_RESOURCES = WireReq.SLOTS;

    /** Staging of one SEND message at most (bytes); a longer SEND is an invalid request. */
    static final int MAX_STAGED = 16 << 20;

    /** A QP's responder state on the wire: reset with the QP. */
    static final class State {
        int msn;
        /** A PSN sequence NAK was sent and the expected PSN has not come yet ({@code sent_psn_nak}). */
        boolean sentPsnNak;
        /** A SEND or WRITE message is open (FIRST seen, LAST not): its operation. */
        int openOp = -1;
        // an open WRITE: where it goes and how far it came
        long wVa;
        int wRkey;
        long wLen;
        long wDone;
        // an open SEND: its staged payload
        MemorySegment stage;
        int staged;
        // the atomics executed last, as rxe's responder resources (resp.resources): a duplicate
        // of any of them gets the same answer, never a second execution. More than one: the
        // requester has up to max_rd_atomic in flight, and when an earlier one's ACK is lost the
        // go-back-N resend repeats them all (one remembered atomic would leave the earlier one
        // unanswered for ever, each resend answering only the later one: an implied NAK again)
        final int[] atomicPsn = new int[ATOMIC_RESOURCES];
        {
            java.util.Arrays.fill(atomicPsn, -1);
        }
        final long[] atomicOrig = new long[ATOMIC_RESOURCES];
        int atomicNext;
        /** At an XRC target: the XRC SRQ the packet being served named (its XRCETH). */
        HwSrq xrcSrq;
    }

    private WireResp() {
    }

    static void receive(WirePort port, HwQp qp, Frame f, RxePkt p) {
        if (qp.serviceType == HcaDevice.ST_UD) {
            ud(port, qp, f, p);
            return;
        }
        State s = qp.resp.wireState();
        if (qp.xrcTarget) {
            HwSrq srq = qp.dev.srq(RxeHdr.xrcethSrqn(f.seg, p.hdr(RxeOpcode.XRCETH)));
            if (srq == null || srq.xrcdn != qp.xrcdn) {
                port.counters.inc(RxeCounters.RCVD_BAD_HDR); // not an SRQ of the target's XRC domain: dropped, no NAK
                return;
            }
            s.xrcSrq = srq;
        }
        int d = RxeHdr.psnCompare(p.psn, qp.resp.ePsn);
        if (d > 0) {
            // a gap: one NAK until the expected PSN comes (rxe's RESPST_ERR_PSN_OUT_OF_SEQ)
            port.counters.inc(RxeCounters.OUT_OF_SEQ_REQ);
            port.port.counters.inc(PortCounters.OUT_OF_SEQUENCE);
            if (!s.sentPsnNak) {
                s.sentPsnNak = true;
                ack(port, qp, p, RxeHdr.AETH_NAK_PSN_SEQ_ERROR, s.msn, qp.resp.ePsn);
            }
            return;
        }
        if (d < 0) {
            duplicate(port, qp, s, f, p);
            return;
        }
        s.sentPsnNak = false;
        qp.resp.receivedInRtr();
        if (!opSeqOk(s, p)) {
            fatal(port, qp, s, p, Outcome.REM_INV_REQ_ERR); // a MIDDLE or LAST without its FIRST, or a FIRST inside a message
            return;
        }
        int mtu = Math.min(qp.mtu, port.activeMtu);
        boolean firstOrMiddle = p.has(RxeOpcode.START | RxeOpcode.MIDDLE) && !p.has(RxeOpcode.END);
        if (p.has(RxeOpcode.PAYLOAD) && (firstOrMiddle ? p.payloadLen != mtu : p.payloadLen > mtu)) {
            fatal(port, qp, s, p, Outcome.REM_INV_REQ_ERR); // rxe_resp_check_length
            return;
        }
        if (p.has(RxeOpcode.SEND)) {
            send(port, qp, s, f, p);
        } else if (p.has(RxeOpcode.WRITE)) {
            write(port, qp, s, f, p);
        } else if (p.has(RxeOpcode.READ)) {
            read(port, qp, s, f, p, p.psn, false);
        } else if (p.has(RxeOpcode.ATOMIC | RxeOpcode.ATOMIC_WRITE)) {
            atomic(port, qp, s, f, p);
        } else if (p.has(RxeOpcode.FLUSH)) {
            flush(port, qp, s, f, p);
        } else {
            fatal(port, qp, s, p, Outcome.REM_INV_REQ_ERR); // an opcode the responder does not serve
        }
    }

    private static boolean opSeqOk(State s, RxePkt p) {
        boolean cont = p.has(RxeOpcode.MIDDLE) || p.has(RxeOpcode.END) && !p.has(RxeOpcode.START);
        if (s.openOp < 0) {
            return !cont;
        }
        return cont && (p.has(RxeOpcode.SEND) ? s.openOp == Wqe.OP_SEND : s.openOp == Wqe.OP_RDMA_WRITE);
    }

    /** The request's sender as the responder reports it: the QP's peer, its GID from the packet's source address. */
    private static Exchange exchange(WirePort port, HwQp qp, RxePkt p, int srcQpn) {
        Exchange x = port.exchange;
        x.senderQp = null;
        x.srcQpn = srcQpn;
        x.slid = 0;
        x.srcPsn = p.psn;
        x.msgLen = -1;
        x.xrcSrq = qp.xrcTarget ? qp.resp.wireState().xrcSrq : null;
        x.errorInReceiveCqe = false;
        WirePort.mappedGid(x.sgid, p.srcIp);
        return x;
    }

    private static SendWqe wqe(WirePort port, int opcode, RxePkt p, Frame f) {
        SendWqe w = port.rxWqe;
        w.opcode = opcode;
        w.ctrl = p.se ? Wqe.CTRL_SOLICITED : 0;
        int imm = RxeOpcode.offset(p.opcode, RxeOpcode.IMMDT);
        w.imm = imm > 0 ? RxeHdr.word(f.seg, p.bth + imm) : 0;
        w.grh = false;
        return w;
    }

    private static void send(WirePort port, HwQp qp, State s, Frame f, RxePkt p) {
        if (p.has(RxeOpcode.START)) {
            s.staged = 0;
            if (!p.has(RxeOpcode.END) && !receiveReady(port, qp)) {
                // as rxe's get_req/check_resource: a message's FIRST finds no receive WQE: RNR NAK at its PSN
                port.counters.inc(RxeCounters.SND_RNR);
                port.port.counters.inc(PortCounters.RNR_NAK_SENT);
                ack(port, qp, p, RxeHdr.AETH_RNR_NAK | qp.minRnrTimer & 0x1F, s.msn, p.psn);
                return;
            }
        }
        if ((long) s.staged + p.payloadLen > MAX_STAGED) {
            fatal(port, qp, s, p, Outcome.REM_INV_REQ_ERR);
            return;
        }
        if (s.stage == null || s.stage.byteSize() < s.staged + p.payloadLen) {
            MemorySegment n = Arena.ofAuto().allocate(Math.max(4096, Math.min(MAX_STAGED, 2 * (s.staged + (long) p.payloadLen))));
            if (s.stage != null) {
                MemorySegment.copy(s.stage, 0, n, 0, s.staged);
            }
            s.stage = n;
        }
        MemorySegment.copy(f.seg, p.payload, s.stage, s.staged, p.payloadLen);
        s.staged += p.payloadLen;
        if (!p.has(RxeOpcode.END)) {
            s.openOp = Wqe.OP_SEND;
            advance(port, qp, s, p, false);
            return;
        }
        boolean imm = p.has(RxeOpcode.IMMDT);
        SendWqe w = wqe(port, imm ? Wqe.OP_SEND_IMM : Wqe.OP_SEND, p, f);
        w.length = s.staged;
        Exchange x = exchange(port, qp, p, qp.destQpn);
        x.local.reset(qp.dev).inline(s.stage, 0, s.staged);
        Outcome o = Responder.respondRc(qp, x, w, s.staged);
        if (o == Outcome.RNR_NAK) {
            s.staged -= p.payloadLen; // the LAST comes again after the back-off
            port.counters.inc(RxeCounters.SND_RNR);
            port.port.counters.inc(PortCounters.RNR_NAK_SENT);
            ack(port, qp, p, RxeHdr.AETH_RNR_NAK | qp.minRnrTimer & 0x1F, s.msn, p.psn);
            return;
        }
        s.openOp = -1;
        if (o != Outcome.SUCCESS) {
            fatal(port, qp, s, p, o);
            return;
        }
        port.counters.inc(RxeCounters.RDMA_RECV);
        advance(port, qp, s, p, true);
    }

    /** A receive WQE is there for a new SEND (the QP's queue or its SRQ), and no responder page fault is being served. */
    private static boolean receiveReady(WirePort port, HwQp qp) {
        if (qp.resp.fault != 0) {
            return false;
        }
        HwSrq srq = qp.xrcTarget ? qp.resp.wireState().xrcSrq : qp.srq;
        RecvQueue q = srq != null ? srq.rq : qp.rq;
        if (q == null) {
            return false;
        }
        long idx = q.peekAndLock(port.exchange.recvCopy);
        if (idx < 0) {
            return false;
        }
        q.unlock(); // only looked: the LAST consumes it
        return true;
    }

    private static void write(WirePort port, HwQp qp, State s, Frame f, RxePkt p) {
        if (p.has(RxeOpcode.START)) {
            int reth = p.hdr(RxeOpcode.RETH);
            s.wVa = RxeHdr.rethVa(f.seg, reth);
            s.wRkey = RxeHdr.rethRkey(f.seg, reth);
            s.wLen = RxeHdr.rethLen(f.seg, reth);
            s.wDone = 0;
            if (s.wLen > 0x8000_0000L) {
                fatal(port, qp, s, p, Outcome.REM_INV_REQ_ERR);
                return;
            }
        }
        boolean last = p.has(RxeOpcode.END);
        if (s.wDone + p.payloadLen > s.wLen || last && s.wDone + p.payloadLen != s.wLen) {
            fatal(port, qp, s, p, Outcome.REM_INV_REQ_ERR); // more or less data than the RETH announced (RESPST_ERR_LENGTH)
            return;
        }
        boolean imm = p.has(RxeOpcode.IMMDT);
        SendWqe w = wqe(port, imm ? Wqe.OP_RDMA_WRITE_IMM : Wqe.OP_RDMA_WRITE, p, f);
        w.remoteAddr = s.wVa + s.wDone;
        w.rkey = s.wRkey;
        w.length = p.payloadLen;
        Exchange x = exchange(port, qp, p, qp.destQpn);
        x.msgLen = s.wLen;
        x.local.reset(qp.dev).inline(f.seg, p.payload, p.payloadLen);
        Outcome o = Responder.respondRc(qp, x, w, p.payloadLen);
        if (o == Outcome.RNR_NAK) {
            port.counters.inc(RxeCounters.SND_RNR);
            port.port.counters.inc(PortCounters.RNR_NAK_SENT);
            ack(port, qp, p, RxeHdr.AETH_RNR_NAK | qp.minRnrTimer & 0x1F, s.msn, p.psn);
            return;
        }
        if (o != Outcome.SUCCESS) {
            fatal(port, qp, s, p, o);
            return;
        }
        s.wDone += p.payloadLen;
        s.openOp = last ? -1 : Wqe.OP_RDMA_WRITE;
        advance(port, qp, s, p, last);
    }

    /**
     * An RDMA READ request (new at {@code psn}, or a duplicate answered again): the responses
     * FIRST/MIDDLE/LAST or ONLY from the PSN on, the data gathered under the rkey's checks; the
     * expected PSN moves past all of them.
     */
    private static void read(WirePort port, HwQp qp, State s, Frame f, RxePkt p, int psn, boolean dup) {
        int reth = p.hdr(RxeOpcode.RETH);
        long va = RxeHdr.rethVa(f.seg, reth);
        int rkey = RxeHdr.rethRkey(f.seg, reth);
        long len = RxeHdr.rethLen(f.seg, reth);
        int mtu = Math.min(qp.mtu, port.activeMtu);
        if (len > 0x8000_0000L) {
            fatal(port, qp, s, p, Outcome.REM_INV_REQ_ERR);
            return;
        }
        Segs src = port.exchange.remote.reset(qp.dev);
        if ((qp.remoteAccess & QpContext.BIT_RRE) == 0) {
            fatal(port, qp, s, p, Outcome.REM_INV_REQ_ERR); // check_op_valid: not allowed by the QP
            return;
        }
        if (len > 0) {
            Mpt m = qp.dev.mpt(rkey);
            // at an XRC target the named SRQ's PD checks the key, as on the fabric (Responder.keyPdn)
            int pdn = qp.xrcTarget ? s.xrcSrq.pdn : qp.pdn;
            int g = m == null ? -1 : m.admit(pdn, va, len, HcaDevice.PERM_REMOTE_READ);
            if (g < 0) {
                fatal(port, qp, s, p, Outcome.REM_ACCESS_ERR);
                return;
            }
            src.add(m, va, len, g);
        }
        int n = (int) Math.max(1, (len + mtu - 1) / mtu);
        if (!dup) {
            s.msn++;
        }
        Frame tx = port.rxTx;
        int sport = RxeNet.udpSport(qp.qpn, qp.destQpn);
        for (int i = 0; i < n; i++) {
            int op = base(qp) + (n == 1 ? RxeOpcode.RC_RDMA_READ_RESPONSE_ONLY : i == 0 ? RxeOpcode.RC_RDMA_READ_RESPONSE_FIRST
                    : i == n - 1 ? RxeOpcode.RC_RDMA_READ_RESPONSE_LAST : RxeOpcode.RC_RDMA_READ_RESPONSE_MIDDLE);
            int payload = (int) Math.min(mtu, len - (long) i * mtu);
            int pad = -payload & 3;
            int hdrs = RxeOpcode.length(op);
            port.headersTo(tx, p.srcIp, p.srcMac, sport, hdrs + payload + pad); // back where the request came from
            RxeHdr.bth(tx.seg, RxeNet.BTH, op, false, pad, RxeHdr.DEFAULT_PKEY, qp.destQpn, false, psn + i);
            int aeth = RxeOpcode.offset(op, RxeOpcode.AETH);
            if (aeth > 0) {
                RxeHdr.aeth(tx.seg, RxeNet.BTH + aeth, RxeHdr.AETH_ACK_UNLIMITED, s.msn);
            }
            Outcome o = DmaMover.gather(src, tx.seg, RxeNet.BTH + hdrs, payload, Outcome.REM_ACCESS_ERR);
            if (o != null) {
                // revoked meanwhile, or an on-demand page missing (not served on the wire path): a remote access error
                fatal(port, qp, s, p, Outcome.REM_ACCESS_ERR);
                return;
            }
            if (pad > 0) {
                tx.seg.asSlice(RxeNet.BTH + hdrs + payload, pad).fill((byte) 0);
            }
            port.send(tx);
        }
        if (!dup) {
            qp.resp.ePsn = (psn + n) & RxeHdr.PSN_MASK;
        }
    }

    /** Compare-and-swap, fetch-and-add or ATOMIC WRITE through the engine's atomic rules; the answer an atomic ACK, or for ATOMIC WRITE a zero-length READ RESPONSE ONLY as rxe gives it. */
    private static void atomic(WirePort port, HwQp qp, State s, Frame f, RxePkt p) {
        int code = RxeOpcode.rcOf(p.opcode);
        boolean store = code == RxeOpcode.RC_ATOMIC_WRITE;
        SendWqe w = wqe(port, store ? Wqe.OP_ATOMIC_WRITE : code == RxeOpcode.RC_COMPARE_SWAP ? Wqe.OP_ATOMIC_CS : Wqe.OP_ATOMIC_FA,
                p, f);
        if (store) {
            int reth = p.hdr(RxeOpcode.RETH);
            w.remoteAddr = RxeHdr.rethVa(f.seg, reth);
            w.rkey = RxeHdr.rethRkey(f.seg, reth);
            if (p.payloadLen != 8 || RxeHdr.rethLen(f.seg, reth) != 8) {
                fatal(port, qp, s, p, Outcome.REM_INV_REQ_ERR);
                return;
            }
            w.compareAdd = f.seg.get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN), p.payload);
        } else {
            int a = p.hdr(RxeOpcode.ATMETH);
            w.remoteAddr = RxeHdr.atmVa(f.seg, a);
            w.rkey = RxeHdr.atmRkey(f.seg, a);
            boolean cs = code == RxeOpcode.RC_COMPARE_SWAP;
            w.compareAdd = cs ? RxeHdr.atmCompare(f.seg, a) : RxeHdr.atmSwapAdd(f.seg, a);
            w.swap = cs ? RxeHdr.atmSwapAdd(f.seg, a) : 0;
        }
        w.length = 8;
        Exchange x = exchange(port, qp, p, qp.destQpn);
        x.local.reset(qp.dev);
        Outcome o = Responder.respondRc(qp, x, w, 8);
        if (o == Outcome.RNR_NAK) {
            port.counters.inc(RxeCounters.SND_RNR);
            port.port.counters.inc(PortCounters.RNR_NAK_SENT);
            ack(port, qp, p, RxeHdr.AETH_RNR_NAK | qp.minRnrTimer & 0x1F, s.msn, p.psn);
            return;
        }
        if (o != Outcome.SUCCESS) {
            fatal(port, qp, s, p, o);
            return;
        }
        s.msn++;
        qp.resp.ePsn = (p.psn + 1) & RxeHdr.PSN_MASK;
        if (store) {
            readResponseAck(port, qp, p, s.msn, p.psn); // rxe's acknowledge(): ATOMIC WRITE as FLUSH, a zero-length READ response
            return;
        }
        int r = s.atomicNext++ & ATOMIC_RESOURCES - 1;
        s.atomicPsn[r] = p.psn;
        s.atomicOrig[r] = x.scratch.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        atomicAck(port, qp, p, s.msn, s.atomicOrig[r]);
    }

    /** A request below the expected PSN: counted; a SEND/WRITE re-acknowledged, a READ answered again, an atomic's saved answer resent. */
    private static void duplicate(WirePort port, HwQp qp, State s, Frame f, RxePkt p) {
        port.counters.inc(RxeCounters.DUP_REQ);
        port.port.counters.inc(PortCounters.DUPLICATE_REQUEST);
        if (p.has(RxeOpcode.READ)) {
            read(port, qp, s, f, p, p.psn, true);
        } else if (p.has(RxeOpcode.ATOMIC)) {
            for (int r = 0; r < ATOMIC_RESOURCES; r++) {
                if (s.atomicPsn[r] == p.psn) {
                    atomicAck(port, qp, p, s.msn, s.atomicOrig[r]); // find_resource: replayed, not executed again
                    break;
                }
            }
        } else if (p.has(RxeOpcode.FLUSH | RxeOpcode.ATOMIC_WRITE)) {
            // duplicate_request for a FLUSH or an ATOMIC WRITE: replayed, not executed again (oA19-14, oA19-15):
            // the zero-length READ response again at its PSN
            readResponseAck(port, qp, p, s.msn, p.psn);
        } else if (p.ackReq) {
            // as rxe: the ACK of the last packet taken, with the MSN as it stands
            ack(port, qp, p, RxeHdr.AETH_ACK_UNLIMITED, s.msn, (qp.resp.ePsn - 1) & RxeHdr.PSN_MASK);
        }
    }

    /** The packet is taken: the expected PSN moves on; a message's end counts in the MSN; an ACK when asked for. */
    private static void advance(WirePort port, HwQp qp, State s, RxePkt p, boolean messageEnd) {
        if (messageEnd) {
            s.msn++;
        }
        qp.resp.ePsn = (p.psn + 1) & RxeHdr.PSN_MASK;
        if (p.ackReq) {
            ack(port, qp, p, RxeHdr.AETH_ACK_UNLIMITED, s.msn, p.psn);
        }
    }

    /**
     * A class A/C error ({@code do_class_ac_error}): the NAK with its syndrome, the responder QP to
     * ERR, and the QP's affiliated event unless a receive completion reported the error.
     */
    private static void fatal(WirePort port, HwQp qp, State s, RxePkt p, Outcome o) {
        int syn = switch (o) {
            case REM_ACCESS_ERR -> RxeHdr.AETH_NAK_REM_ACC_ERR;
            case REM_INV_REQ_ERR -> RxeHdr.AETH_NAK_INVALID_REQ;
            default -> RxeHdr.AETH_NAK_REM_OP_ERR;
        };
        ack(port, qp, p, syn, s.msn, p.psn);
        s.openOp = -1;
        boolean inCqe = port.exchange.errorInReceiveCqe;
        port.exchange.errorInReceiveCqe = false;
        qp.transportError();
        if (!inCqe) {
            qp.dev.asyncEvent((o.responderFatal() ? o : Outcome.REM_OP_ERR).responderEvent(), qp.qpn);
        }
    }

    /** An ACKNOWLEDGE to the requester with {@code syndrome} and {@code msn} at {@code psn}. */
    static void ack(WirePort port, HwQp qp, RxePkt p, int syndrome, int msn, int psn) {
        Frame tx = port.rxTx;
        port.headersTo(tx, p.srcIp, p.srcMac, RxeNet.udpSport(qp.qpn, qp.destQpn), RxeHdr.BTH_BYTES + RxeHdr.AETH_BYTES);
        RxeHdr.bth(tx.seg, RxeNet.BTH, base(qp) + RxeOpcode.RC_ACKNOWLEDGE, false, 0, RxeHdr.DEFAULT_PKEY, qp.destQpn, false, psn);
        RxeHdr.aeth(tx.seg, RxeNet.BTH + RxeHdr.BTH_BYTES, syndrome, msn);
        port.send(tx);
    }

    private static void atomicAck(WirePort port, HwQp qp, RxePkt p, int msn, long orig) {
        Frame tx = port.rxTx;
        int l4 = RxeHdr.BTH_BYTES + RxeHdr.AETH_BYTES + RxeHdr.ATMACK_BYTES;
        port.headersTo(tx, p.srcIp, p.srcMac, RxeNet.udpSport(qp.qpn, qp.destQpn), l4);
        RxeHdr.bth(tx.seg, RxeNet.BTH, base(qp) + RxeOpcode.RC_ATOMIC_ACKNOWLEDGE, false, 0, RxeHdr.DEFAULT_PKEY, qp.destQpn, false, p.psn);
        RxeHdr.aeth(tx.seg, RxeNet.BTH + RxeHdr.BTH_BYTES, RxeHdr.AETH_ACK_UNLIMITED, msn);
        RxeHdr.atomicAckEth(tx.seg, RxeNet.BTH + RxeHdr.BTH_BYTES + RxeHdr.AETH_BYTES, orig);
        port.send(tx);
    }

    /** The first opcode of the QP's transport block: an XRC target answers in the XRC block. */
    private static int base(HwQp qp) {
        return qp.serviceType == HcaDevice.ST_XRC ? RxeOpcode.XRC_BASE : 0;
    }

    /**
     * RDMA FLUSH ({@code process_flush}): the FETH's placement type and selectivity level and the
     * RETH's range served by the engine's FLUSH (the QP's FLUSH rights, the key's, the range, the
     * flushing reads: {@link Responder}); then the MSN and the expected PSN move on and the answer
     * is a zero-length READ RESPONSE ONLY. A QP without the type's right is an invalid-request
     * NAK, a key without it or a range outside it a remote-access NAK, as rxe gives them.
     */
    private static void flush(WirePort port, HwQp qp, State s, Frame f, RxePkt p) {
        SendWqe w = wqe(port, Wqe.OP_FLUSH, p, f);
        int feth = p.hdr(RxeOpcode.FETH);
        w.flushType = RxeHdr.fethPlt(f.seg, feth);
        w.flushLevel = RxeHdr.fethSel(f.seg, feth);
        int reth = p.hdr(RxeOpcode.RETH);
        w.remoteAddr = RxeHdr.rethVa(f.seg, reth);
        w.rkey = RxeHdr.rethRkey(f.seg, reth);
        w.length = RxeHdr.rethLen(f.seg, reth);
        Exchange x = exchange(port, qp, p, qp.destQpn);
        x.local.reset(qp.dev);
        Outcome o = Responder.respondRc(qp, x, w, w.length);
        if (o == Outcome.RNR_NAK) {
            port.counters.inc(RxeCounters.SND_RNR);
            port.port.counters.inc(PortCounters.RNR_NAK_SENT);
            ack(port, qp, p, RxeHdr.AETH_RNR_NAK | qp.minRnrTimer & 0x1F, s.msn, p.psn);
            return;
        }
        if (o != Outcome.SUCCESS) {
            fatal(port, qp, s, p, o);
            return;
        }
        s.msn++;
        qp.resp.ePsn = (p.psn + 1) & RxeHdr.PSN_MASK;
        readResponseAck(port, qp, p, s.msn, p.psn);
    }

    /** {@code send_read_response_ack}: a READ RESPONSE ONLY without payload, its AETH an ACK, at {@code psn}. */
    private static void readResponseAck(WirePort port, HwQp qp, RxePkt p, int msn, int psn) {
        Frame tx = port.rxTx;
        int op = base(qp) + RxeOpcode.RC_RDMA_READ_RESPONSE_ONLY;
        port.headersTo(tx, p.srcIp, p.srcMac, RxeNet.udpSport(qp.qpn, qp.destQpn), RxeOpcode.length(op));
        RxeHdr.bth(tx.seg, RxeNet.BTH, op, false, 0, RxeHdr.DEFAULT_PKEY, qp.destQpn, false, psn);
        RxeHdr.aeth(tx.seg, RxeNet.BTH + RxeOpcode.offset(op, RxeOpcode.AETH), RxeHdr.AETH_ACK_UNLIMITED, msn);
        port.send(tx);
    }

    /** A UD datagram: the Q_Key checked (a mismatch is dropped), then delivered or lost as the engine's UD rules say. */
    private static void ud(WirePort port, HwQp qp, Frame f, RxePkt p) {
        int deth = p.hdr(RxeOpcode.DETH);
        if (RxeHdr.dethQkey(f.seg, deth) != qp.qkey || p.payloadLen > Math.min(qp.mtu, port.activeMtu)) {
            port.counters.inc(RxeCounters.RCVD_BAD_HDR);
            return;
        }
        boolean imm = p.has(RxeOpcode.IMMDT);
        SendWqe w = wqe(port, imm ? Wqe.OP_SEND_IMM : Wqe.OP_SEND, p, f);
        w.length = p.payloadLen;
        w.grh = true; // on RoCE the IP header stands for the GRH
        WirePort.mappedGid(w.dgid, port.ip);
        Exchange x = exchange(port, qp, p, RxeHdr.dethSqp(f.seg, deth));
        x.local.reset(qp.dev).inline(f.seg, p.payload, p.payloadLen);
        qp.resp.receivedInRtr();
        Responder.deliverUd(qp, x, w, p.payloadLen);
        port.counters.inc(RxeCounters.RDMA_RECV);
    }
}
