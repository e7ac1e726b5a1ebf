package org.peerdirect.hca.engine;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.wire.Frame;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeHdr;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.RxeOpcode;

/**
 * The requester of one QP on a wire ({@code rxe_req.c}): turns the WQE at the head of the send
 * queue into packets segmented at the path MTU (SEND and RDMA WRITE with or without immediate,
 * RDMA READ requests, atomics, ATOMIC WRITE; UD SEND with DETH), sends them, and waits for the
 * {@link WireComp completer}'s verdict: the WQE's last ACK, its READ response or atomic ACK, a
 * NAK, or the local ACK timeout, after which it retransmits from the first unacknowledged packet
 * (go-back-N) while {@code retry_cnt} lasts (7: for ever, as rxe).
 *
 * <p>One WQE is in flight at a time (its ACK comes before the next WQE is sent): a simpler window
 * than rxe's, with the same packets, PSNs and outcomes.
 *
 * <p>Threads: the drain loop of the QP's {@link Requester} (the wip holder) runs {@link #execute}
 * and owns the in-flight fields; the link's receive thread runs the completer, which reads the
 * published WQE ({@link #inflight}, {@link #firstPsn}, {@link #npkts}, volatile) and posts its
 * verdict ({@link #post}, {@link #postResend}, tagged with the WQE) before ringing the doorbell.
 */
final class WireReq {

    private final HwQp qp;
    private final Requester req;
    private final Frame tx = new Frame();
    /** The WQE in flight (its index; -1 none), its first PSN and packet count (READ: its response packets). */
    volatile long inflight = -1;
    volatile int firstPsn;
    volatile int npkts;
    volatile int opcode;
    private long deadline;
    /** The packet to (re)send from on the next execute; -1: all sent, waiting. */
    private int sendFrom;
    /**
     * Posted by the completer: the verdict on WQE {@code h} as {@code h << 8 | outcome ordinal}
     * (SUCCESS, RNR_NAK, an error), -1 none. Tagged with the WQE so a verdict on a WQE that is no
     * longer in flight (a late duplicate ACK racing the next WQE) is never taken for the next one.
     */
    private final java.util.concurrent.atomic.AtomicLong verdict = new java.util.concurrent.atomic.AtomicLong(-1);
    /** Posted by the completer: resend WQE {@code h} from packet {@code k} (a PSN sequence NAK), as {@code h << 24 | k}; -1 none. */
    private final java.util.concurrent.atomic.AtomicLong resend = new java.util.concurrent.atomic.AtomicLong(-1);
    private static final Outcome[] OUTCOMES = Outcome.values();
    /** The RNR NAK's timer (encoded), for the requester's back-off. */
    volatile int rnrTimer = -1;
    // the completer's placement of READ responses and atomic results (receive thread)
    final Segs compLocal = new Segs(HcaDevice.MAX_SGE);
    /** READ responses placed so far (the next one expected); written by the completer. */
    volatile int compNext;
    /** The response a READ retry was last asked from (the completer's, one retry per gap); -1 none. */
    volatile int readRetryFrom = -1; // reset by the drain per WQE; a race only costs one fast retry (the timeout covers)

    WireReq(HwQp qp, Requester req) {
        this.qp = qp;
        this.req = req;
    }

    /** True when the completer posted something the drain has not taken yet. */
    boolean news() {
        return verdict.get() >= 0 || resend.get() >= 0;
    }

    /** The completer's verdict on WQE {@code h} ({@link WireComp}; the receive thread). */
    void post(long h, Outcome o) {
        verdict.set(h << 8 | o.ordinal());
    }

    /** The completer asks WQE {@code h} to be resent from packet {@code k}. */
    void postResend(long h, int k) {
        resend.set(h << 24 | k);
    }

    /** Takes the verdict on {@code h}, or null (none, or one on another WQE: dropped). */
    private Outcome takeVerdict(long h) {
        long v = verdict.getAndSet(-1);
        return v >= 0 && v >>> 8 == h ? OUTCOMES[(int) (v & 0xFF)] : null;
    }

    /** Takes the resend request for {@code h}: its packet, or -1. */
    private int takeResend(long h) {
        long v = resend.getAndSet(-1);
        return v >= 0 && v >>> 24 == h ? (int) (v & 0xFFFFFF) : -1;
    }

    /** Nanoseconds until the local ACK timeout of the WQE in flight (at least 1). */
    long remainingNanos() {
        return Math.max(1, deadline - System.nanoTime());
    }

    /** A reset or flush: nothing is in flight any more. */
    void forget() {
        inflight = -1;
        verdict.set(-1);
        resend.set(-1);
        rnrTimer = -1;
    }

    /**
     * Executes WQE {@code h} on the wire: sends it (or the rest of it after a NAK or timeout) and
     * answers {@link Outcome#AWAIT_ACK}, or returns the completer's verdict once it came. The
     * local side was gathered into {@code req.local} by the caller.
     */
    Outcome execute(SendWqe w, long h, WirePort port) {
        if (inflight != h) {
            // a new WQE (or the first after a reset): its PSNs start at the QP's next PSN
            forget();
            int mtu = Math.min(qp.mtu, port.activeMtu);
            int n = Wqe.hasAtomicSegment(w.opcode) ? 1 : (int) Math.max(1, (w.length + mtu - 1) / mtu);
            firstPsn = qp.sqPsn;
            npkts = n;
            opcode = w.opcode;
            compNext = 0;
            readRetryFrom = -1;
            sendFrom = 0;
            inflight = h; // published last: the completer matches packets against the fields above
        }
        Outcome r = takeVerdict(h);
        if (r != null) {
            if (r == Outcome.RNR_NAK) {
                sendFrom = Math.max(0, takeResend(h));
                return r; // the drain backs off by the NAK's timer, then comes back here to resend
            }
            inflight = -1;
            if (r == Outcome.SUCCESS) {
                qp.sqPsn = (firstPsn + npkts) & RxeHdr.PSN_MASK;
                if (w.opcode == Wqe.OP_SEND || w.opcode == Wqe.OP_SEND_IMM) {
                    port.counters.inc(RxeCounters.RDMA_SEND); // as rxe's do_complete
                }
            }
            return r;
        }
        int k = takeResend(h);
        if (k >= 0) {
            // a PSN sequence NAK: go back to the packet it names (a retry, as rxe's COMPST_ERROR_RETRY)
            Outcome o = retry(port);
            if (o != null) {
                return o;
            }
            sendFrom = k;
        } else if (sendFrom < 0) {
            if (System.nanoTime() - deadline < 0) {
                return Outcome.AWAIT_ACK; // woken early (a stale timer, a coalesced ACK): keep waiting
            }
            Outcome o = retry(port);
            if (o != null) {
                return o;
            }
            sendFrom = Math.min(compNext, npkts - 1); // a READ resumes after the responses placed so far
            if (!Wqe.readsResponse(w.opcode)) {
                sendFrom = 0;
            }
        }
        Outcome o = sendPackets(w, port, sendFrom);
        if (o != null) {
            inflight = -1;
            return o;
        }
        sendFrom = -1;
        deadline = System.nanoTime() + QpContext.ackTimeoutNanos(qp.ackTimeout);
        return Outcome.AWAIT_ACK;
    }

    /** One retry of {@code retry_cnt}: null to retransmit, or the WQE's end in RETRY_EXC_ERR. */
    private Outcome retry(WirePort port) {
        if (qp.retryCount != 7 && req.retryLeft-- == 0) {
            port.counters.inc(RxeCounters.RETRY_EXCEEDED);
            inflight = -1;
            return Outcome.RETRY_EXC_ERR;
        }
        port.counters.inc(RxeCounters.COMP_RETRY); // counted per retry, as rxe's COMPST_ERROR_RETRY
        qp.dev.retries.incrementAndGet();
        return null;
    }

    /** The operation's opcodes: FIRST, MIDDLE, LAST, ONLY. */
    private static int[] opcodes(int op) {
        return switch (op) {
            case Wqe.OP_SEND -> SEND;
            case Wqe.OP_SEND_IMM -> SEND_IMM;
            case Wqe.OP_RDMA_WRITE -> WRITE;
            default -> WRITE_IMM;
        };
    }

    private static final int[] SEND = {RxeOpcode.RC_SEND_FIRST, RxeOpcode.RC_SEND_MIDDLE, RxeOpcode.RC_SEND_LAST, RxeOpcode.RC_SEND_ONLY};
    private static final int[] SEND_IMM = {RxeOpcode.RC_SEND_FIRST, RxeOpcode.RC_SEND_MIDDLE, RxeOpcode.RC_SEND_LAST_WITH_IMMEDIATE,
            RxeOpcode.RC_SEND_ONLY_WITH_IMMEDIATE};
    private static final int[] WRITE = {RxeOpcode.RC_RDMA_WRITE_FIRST, RxeOpcode.RC_RDMA_WRITE_MIDDLE, RxeOpcode.RC_RDMA_WRITE_LAST,
            RxeOpcode.RC_RDMA_WRITE_ONLY};
    private static final int[] WRITE_IMM = {RxeOpcode.RC_RDMA_WRITE_FIRST, RxeOpcode.RC_RDMA_WRITE_MIDDLE,
            RxeOpcode.RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, RxeOpcode.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE};

    /**
     * Sends packets {@code from}..last of the WQE ({@code rxe_requester}'s loop with
     * {@code init_req_packet} and {@code finish_packet}); null, or the local error that fails the
     * WQE (a source key revoked: LOC_PROT_ERR; a missing on-demand page: PAGE_FAULT).
     */
    private Outcome sendPackets(SendWqe w, WirePort port, int from) {
        int mtu = Math.min(qp.mtu, port.activeMtu);
        int dip = qp.wireDip;
        int sport = RxeNet.udpSport(qp.qpn, qp.destQpn);
        boolean solicited = (w.ctrl & Wqe.CTRL_SOLICITED) != 0;
        switch (w.opcode) {
            case Wqe.OP_RDMA_READ -> {
                long off = (long) from * mtu;
                MemorySegment f = tx.seg;
                int l4 = RxeHdr.BTH_BYTES + RxeHdr.RETH_BYTES;
                if (!port.headers(tx, dip, sport, l4)) {
                    return null;
                }
                RxeHdr.bth(f, RxeNet.BTH, RxeOpcode.RC_RDMA_READ_REQUEST, false, 0, RxeHdr.DEFAULT_PKEY, qp.destQpn, true,
                        firstPsn + from);
                RxeHdr.reth(f, RxeNet.BTH + RxeHdr.BTH_BYTES, w.remoteAddr + off, w.rkey, w.length - off);
                port.send(tx);
                return null;
            }
            case Wqe.OP_ATOMIC_CS, Wqe.OP_ATOMIC_FA -> {
                int l4 = RxeHdr.BTH_BYTES + RxeHdr.ATMETH_BYTES;
                if (!port.headers(tx, dip, sport, l4)) {
                    return null;
                }
                RxeHdr.bth(tx.seg, RxeNet.BTH, w.opcode == Wqe.OP_ATOMIC_CS ? RxeOpcode.RC_COMPARE_SWAP : RxeOpcode.RC_FETCH_ADD, false, 0,
                        RxeHdr.DEFAULT_PKEY, qp.destQpn, true, firstPsn);
                // compare-and-swap: swap then compare; fetch-and-add: the addend in the first field
                long swapAdd = w.opcode == Wqe.OP_ATOMIC_CS ? w.swap : w.compareAdd;
                long cmp = w.opcode == Wqe.OP_ATOMIC_CS ? w.compareAdd : 0;
                RxeHdr.atomicEth(tx.seg, RxeNet.BTH + RxeHdr.BTH_BYTES, w.remoteAddr, w.rkey, swapAdd, cmp);
                port.send(tx);
                return null;
            }
            case Wqe.OP_ATOMIC_WRITE -> {
                int l4 = RxeHdr.BTH_BYTES + RxeHdr.RETH_BYTES + 8;
                if (!port.headers(tx, dip, sport, l4)) {
                    return null;
                }
                RxeHdr.bth(tx.seg, RxeNet.BTH, RxeOpcode.RC_ATOMIC_WRITE, false, 0, RxeHdr.DEFAULT_PKEY, qp.destQpn, true, firstPsn);
                RxeHdr.reth(tx.seg, RxeNet.BTH + RxeHdr.BTH_BYTES, w.remoteAddr, w.rkey, 8);
                // the 8 bytes as they lie in memory (rxe stores the payload's bytes as they are)
                tx.seg.set(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN),
                        RxeNet.BTH + RxeHdr.BTH_BYTES + RxeHdr.RETH_BYTES, w.compareAdd);
                port.send(tx);
                return null;
            }
            default -> {
                return sendData(w, port, from, mtu, dip, sport, solicited);
            }
        }
    }

    /** SEND / WRITE packets {@code from}..last, each payload gathered from the local segments. */
    private Outcome sendData(SendWqe w, WirePort port, int from, int mtu, int dip, int sport, boolean solicited) {
        int[] ops = opcodes(w.opcode);
        Segs src = req.local;
        src.skip((long) from * mtu);
        for (int i = from; i < npkts; i++) {
            boolean first = i == 0;
            boolean last = i == npkts - 1;
            int op = first && last ? ops[3] : first ? ops[0] : last ? ops[2] : ops[1];
            int payload = (int) Math.min(mtu, w.length - (long) i * mtu);
            int pad = -payload & 3;
            int hdrs = RxeOpcode.length(op);
            int l4 = hdrs + payload + pad;
            if (!port.headers(tx, dip, sport, l4)) {
                return null; // the neighbour is being resolved: the retry sends it
            }
            MemorySegment f = tx.seg;
            RxeHdr.bth(f, RxeNet.BTH, op, last && solicited, pad, RxeHdr.DEFAULT_PKEY, qp.destQpn, last, firstPsn + i);
            int reth = RxeOpcode.offset(op, RxeOpcode.RETH);
            if (reth > 0) {
                RxeHdr.reth(f, RxeNet.BTH + reth, w.remoteAddr, w.rkey, w.length);
            }
            int imm = RxeOpcode.offset(op, RxeOpcode.IMMDT);
            if (imm > 0) {
                RxeHdr.word(f, RxeNet.BTH + imm, w.imm);
            }
            int at = RxeNet.BTH + hdrs;
            Outcome o = DmaMover.gather(src, f, at, payload, Outcome.LOC_PROT_ERR);
            if (o != null) {
                return o;
            }
            if (pad > 0) {
                f.asSlice(at + payload, pad).fill((byte) 0);
            }
            port.send(tx);
        }
        return null;
    }

    /**
     * A UD SEND ({@code UD_SEND_ONLY[_WITH_IMMEDIATE]} with DETH) to the address vector's GID:
     * sent, and complete (unreliable); lost when the GID is not IPv4-mapped or its neighbour is
     * not known yet (an ARP request goes out for the next datagram).
     */
    Outcome sendUd(SendWqe w, WirePort port) {
        if (w.length > port.activeMtu) {
            return Outcome.LOC_LEN_ERR; // a datagram is one packet: no larger than the port's MTU
        }
        byte[] g = w.dgid;
        int dip = WirePort.ipOfGid(g);
        if (dip == 0) {
            return Outcome.SUCCESS;
        }
        // the address handle's MAC: resolved (bounded) before the first datagram, as rxe's AH creation does
        port.resolve(dip);
        boolean imm = Wqe.hasImm(w.opcode);
        int op = imm ? RxeOpcode.UD_SEND_ONLY_WITH_IMMEDIATE : RxeOpcode.UD_SEND_ONLY;
        int payload = (int) w.length;
        int pad = -payload & 3;
        int hdrs = RxeOpcode.length(op);
        if (!port.headers(tx, dip, RxeNet.udpSport(qp.qpn), hdrs + payload + pad)) {
            return Outcome.SUCCESS;
        }
        MemorySegment f = tx.seg;
        RxeHdr.bth(f, RxeNet.BTH, op, (w.ctrl & Wqe.CTRL_SOLICITED) != 0, pad, RxeHdr.DEFAULT_PKEY, w.remoteQpn, false, qp.sqPsn);
        qp.sqPsn = (qp.sqPsn + 1) & RxeHdr.PSN_MASK;
        RxeHdr.deth(f, RxeNet.BTH + RxeHdr.BTH_BYTES, w.remoteQkey < 0 ? qp.qkey : w.remoteQkey, qp.qpn);
        if (imm) {
            RxeHdr.word(f, RxeNet.BTH + RxeHdr.BTH_BYTES + RxeHdr.DETH_BYTES, w.imm);
        }
        Outcome o = DmaMover.gather(req.local, f, RxeNet.BTH + hdrs, payload, Outcome.LOC_PROT_ERR);
        if (o != null) {
            return o;
        }
        if (pad > 0) {
            f.asSlice(RxeNet.BTH + hdrs + payload, pad).fill((byte) 0);
        }
        port.send(tx);
        port.counters.inc(RxeCounters.RDMA_SEND);
        return Outcome.SUCCESS;
    }
}
