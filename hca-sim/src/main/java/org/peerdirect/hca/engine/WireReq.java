package org.peerdirect.hca.engine;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.wire.Frame;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeHdr;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.RxeOpcode;

/**
 * The requester of one QP on a wire ({@code rxe_req.c}): turns WQEs of the send queue into packets
 * segmented at the path MTU (SEND and RDMA WRITE with or without immediate, RDMA READ requests,
 * atomics, ATOMIC WRITE, RDMA FLUSH with its FETH; UD SEND with DETH) and keeps a <em>send
 * window</em> of them in flight; the {@link WireComp completer} acknowledges them. A FLUSH joins
 * the window only as the drain's head, once every WQE before it completed ({@link #fits}).
 *
 * <p>The window is the WQEs {@code [doneTo, sendNext)}: sent, not completed. A new WQE joins it
 * while fewer than {@value #MAX_UNACKED_PSNS} PSNs are unacknowledged ({@code RXE_MAX_UNACKED_PSNS},
 * checked when a WQE starts: one message may overrun it, as a WQE goes out whole), fewer than
 * {@code max_rd_atomic} READs and atomics are outstanding when it is one, no READ or atomic is
 * outstanding when it is fenced, and fewer than {@value #SLOTS} WQEs are in flight. The completer
 * moves {@code doneTo} (one coalesced ACK completes every WQE below its PSN) and posts what the
 * window's head needs: an error (a NAK), an RNR back-off, a resend from a packet (a sequence NAK,
 * an implied NAK, a missing READ response). The local ACK timeout resends from the first
 * unacknowledged PSN (go-back-N: everything after it goes again), while {@code retry_cnt} lasts
 * (7: for ever, as rxe).
 *
 * <p>An XRC initiator ("XRC send") QP sends the same packets in the XRC opcode block
 * ({@code IB_OPCODE_XRC_*}, 0xA0 + the RC operation), each with an XRCETH after the BTH naming the
 * target's XRC SRQ ({@link SendWqe#xrcSrqn}); the IBA defines no XRC FLUSH or ATOMIC WRITE opcode,
 * so those two are refused before they start ({@link Requester}).
 *
 * <p>The drain of the QP's {@link Requester} calls {@link #execute} for its head WQE: a WQE below
 * {@code doneTo} completes, the head's verdict is taken, the window is refilled.
 *
 * <p>Lock rules: the window's fields are guarded by this object's monitor, taken by the drain and
 * by the completer (the link's receive thread). Packets are sent without it (by the drain only), and
 * {@link Requester#wake} is rung after it is released. A WQE's slot in the window ({@link #first},
 * {@link #npk}, {@link #ops}) is written before its first packet goes out, so any answer to it
 * finds it.
 */
final class WireReq {

    /** PSNs unacknowledged before a new WQE waits ({@code RXE_MAX_UNACKED_PSNS}). */
    static final int MAX_UNACKED_PSNS = 128;
    /** WQEs in flight at most (each takes at least one PSN, so the PSN window bounds them first). */
    static final int SLOTS = 128;
    private static final int MASK = SLOTS - 1;

    private final HwQp qp;
    private final Requester req;
    private final Frame tx = new Frame();

    // ---- the window; guarded by this
    /** WQEs below completed successfully; the window's head (the drain's head may still be below it). */
    long doneTo;
    /** The next WQE to send. */
    long sendNext;
    /** The first PSN not acknowledged yet ({@code qp->comp.psn}). */
    int compPsn;
    /** The first PSN of the next new WQE ({@code qp->req.psn}; also in {@link HwQp#sqPsn}). */
    int nextPsn;
    /** Per WQE in flight (index {@code h & MASK}): its first PSN, its packets (READ: its responses), its opcode. */
    final int[] first = new int[SLOTS];
    final int[] npk = new int[SLOTS];
    final int[] ops = new int[SLOTS];
    /** Posted by the completer for the head: it fails with this (a NAK's error, a bad response); null none. */
    Outcome error;
    /** Posted by the completer for the head: resend it from this packet (and all after it); -1 none. */
    int resendPkt = -1;
    /** The resend waits for the RNR NAK's timer ({@link #rnrTimer}); the drain was told ({@link #rnrReported}). */
    boolean rnr;
    private boolean rnrReported;
    private long rnrUntil;
    /** The PSN a resend was last asked from: one per gap (later packets of the same gap ask nothing). */
    int lastResendPsn = -1;
    /** The most WQEs the window held at once (a test's and a bench's evidence that it is one). */
    int maxInFlight;
    /** The RNR NAK's timer (encoded), for the requester's back-off. */
    volatile int rnrTimer = -1;
    // ---- the ACK timer, and news for the drain's stall (volatile: read without the lock)
    /** When the window last moved (a packet sent, an acknowledgement): the local ACK timeout runs from it. */
    volatile long progressAt;
    /** Bumped by the completer on each verdict or completion; the drain remembers what it saw. */
    volatile long news;
    private long newsSeen;
    // the completer's placement of READ responses and atomic results (receive thread)
    final Segs compLocal = new Segs(HcaDevice.MAX_SGE);

    WireReq(HwQp qp, Requester req) {
        this.qp = qp;
        this.req = req;
    }

    /** True when the completer posted something since the drain last looked. */
    boolean news() {
        return news != newsSeen;
    }

    /** WQE {@code h} (the drain's head) was sent and is in the window, or acknowledged and not completed yet. */
    synchronized boolean inWindow(long h) {
        return h < sendNext && h <= doneTo;
    }

    /** Nanoseconds until the local ACK timeout (or the RNR back-off's end), at least 1. */
    long remainingNanos() {
        long now = System.nanoTime();
        long at = rnr ? rnrUntil : progressAt + QpContext.ackTimeoutNanos(qp.ackTimeout);
        return Math.max(1, at - now);
    }

    /** Empties the window at {@code h}: a reset discarded it, or the head failed (the QP goes to ERR). */
    private void restart(long h) {
        assert Thread.holdsLock(this);
        doneTo = h;
        sendNext = h;
        nextPsn = qp.sqPsn;
        compPsn = nextPsn;
        error = null;
        resendPkt = -1;
        rnr = false;
        rnrReported = false;
        rnrTimer = -1;
        lastResendPsn = -1;
    }

    /**
     * Executes WQE {@code h}, the drain's head: completes it when the window acknowledged it, takes
     * the completer's verdict on it, resends after a NAK or the timeout, sends new WQEs into the
     * window; answers {@link Outcome#AWAIT_ACK} while it waits.
     */
    Outcome execute(SendWqe w, long h, WirePort port) {
        int from = -1;
        synchronized (this) {
            newsSeen = news;
            if (h > doneTo) {
                restart(h); // the drain's head passed the window: a reset discarded it, or its head failed
            }
            if (h < doneTo) {
                if (w.opcode == Wqe.OP_SEND || w.opcode == Wqe.OP_SEND_IMM) {
                    port.counters.inc(RxeCounters.RDMA_SEND); // as rxe's do_complete
                }
                return Outcome.SUCCESS;
            }
            if (doneTo == sendNext) {
                restart(h); // nothing in flight: the window starts at the QP's PSN (a transition may have set it)
            } else {
                if (error != null) {
                    Outcome o = error;
                    restart(h + 1);
                    return o;
                }
                if (rnr) {
                    if (!rnrReported) {
                        rnrReported = true;
                        rnrUntil = System.nanoTime() + QpContext.rnrTimerNanos(rnrTimer);
                        return Outcome.RNR_NAK; // the drain counts rnr_retry and backs off, then comes back here
                    }
                    if (System.nanoTime() - rnrUntil < 0) {
                        return Outcome.AWAIT_ACK; // woken before the back-off ended
                    }
                    rnr = false;
                    rnrReported = false;
                    from = Math.max(0, resendPkt); // after the back-off: resend from the NAKed packet, no retry counted
                    resendPkt = -1;
                } else if (resendPkt >= 0) {
                    // a sequence NAK, an implied NAK or a missing READ response: a retry (rxe's COMPST_ERROR_RETRY)
                    from = resendPkt;
                    resendPkt = -1;
                    Outcome o = retry(port);
                    if (o != null) {
                        restart(h + 1);
                        return o;
                    }
                } else if (System.nanoTime() - progressAt - QpContext.ackTimeoutNanos(qp.ackTimeout) >= 0) {
                    Outcome o = retry(port); // the local ACK timeout: from the first unacknowledged PSN
                    if (o != null) {
                        restart(h + 1);
                        return o;
                    }
                    int s = (int) h & MASK;
                    from = Math.clamp(RxeHdr.psnCompare(compPsn, first[s]), 0, npk[s] - 1);
                    lastResendPsn = -1;
                }
            }
        }
        if (from >= 0) {
            Outcome o = resend(h, from, port);
            if (o != null) {
                return o;
            }
        }
        return fill(h, port);
    }

    /** One retry of {@code retry_cnt}: null to retransmit, or the head's end in RETRY_EXC_ERR. */
    private Outcome retry(WirePort port) {
        if (qp.retryCount != 7 && req.retryLeft-- == 0) {
            port.counters.inc(RxeCounters.RETRY_EXCEEDED);
            return Outcome.RETRY_EXC_ERR;
        }
        port.counters.inc(RxeCounters.COMP_RETRY); // counted per retry, as rxe's COMPST_ERROR_RETRY
        qp.dev.retries.incrementAndGet();
        return null;
    }

    /**
     * Go-back-N: the head {@code h} from packet {@code from}, then every WQE after it in the window
     * (rxe rewinds {@code req.psn} and sends them again). A WQE whose local data cannot be read any
     * more ends the window there (it and those after it are sent anew when their turn comes, with
     * the same PSNs); when that is the head, its error is the answer.
     */
    private Outcome resend(long h, int from, WirePort port) {
        long end;
        synchronized (this) {
            end = sendNext;
            progressAt = System.nanoTime();
        }
        for (long x = h; x < end; x++) {
            int s = (int) x & MASK;
            SendWqe w = qp.sqSlot(x);
            Outcome o = req.prepareRc(w);
            if (o == null) {
                o = sendPackets(w, port, x == h ? from : 0, first[s], npk[s]);
            }
            if (o != null) {
                truncate(x);
                return x == h ? o : null;
            }
        }
        return null;
    }

    /** The window ends before WQE {@code x} (its packets are sent again, with the same PSNs, when it is sent next). */
    private synchronized void truncate(long x) {
        if (x < sendNext) {
            sendNext = x;
            nextPsn = first[(int) x & MASK];
            qp.sqPsn = nextPsn;
        }
    }

    /**
     * Sends new WQEs of the send queue into the window while it has room ({@code rxe_requester}'s
     * checks: the PSN window, {@code max_rd_atomic}, the fence). The head, when the window was
     * empty, is one of them; its local error is the answer. A WQE after the head that cannot go on
     * the wire as it is (a local error, an operation the wire does not carry) waits until it is the
     * head: the drain then fails or runs it.
     */
    private Outcome fill(long h, WirePort port) {
        int mtu = Math.min(qp.mtu, port.activeMtu);
        for (;;) {
            long x;
            int psn;
            int n;
            SendWqe w;
            synchronized (this) {
                x = sendNext;
                if (x >= qp.sqTail() || !qp.state.sends() || !port.port.active || x - doneTo >= SLOTS - 1) {
                    break;
                }
                w = qp.sqSlot(x);
                if (x != h && !fits(w)) {
                    break;
                }
                n = onePacket(w.opcode) ? 1 : (int) Math.max(1, (w.length + mtu - 1) / mtu);
                psn = nextPsn;
                if (x != h) {
                    Outcome o = req.prepareRc(w);
                    if (o != null) {
                        break;
                    }
                }
                int s = (int) x & MASK;
                first[s] = psn;
                npk[s] = n;
                ops[s] = w.opcode;
                sendNext = x + 1;
                maxInFlight = (int) Math.max(maxInFlight, sendNext - doneTo);
                nextPsn = (psn + n) & RxeHdr.PSN_MASK;
                qp.sqPsn = nextPsn;
                progressAt = System.nanoTime();
            }
            // the head's local data was gathered by the drain (Requester.executeRc); a later WQE's just above
            Outcome o = sendPackets(w, port, 0, psn, n);
            if (o != null) {
                truncate(x);
                if (x == h) {
                    return o;
                }
                break;
            }
        }
        return Outcome.AWAIT_ACK;
    }

    /** A WQE after the head may join the window now ({@code rxe_req.c}'s checks before it starts one). */
    private boolean fits(SendWqe w) {
        assert Thread.holdsLock(this);
        int op = w.opcode;
        if (!Wqe.valid(op) || op == Wqe.OP_FLUSH) {
            return false; // the drain fails or runs it as the head
        }
        if (doneTo < sendNext && RxeHdr.psnCompare(nextPsn, compPsn) >= MAX_UNACKED_PSNS) {
            return false;
        }
        boolean fenced = (w.ctrl & Wqe.CTRL_FENCE) != 0;
        if (awaitsResponse(op) || fenced) {
            int outstanding = 0;
            for (long y = doneTo; y < sendNext; y++) {
                if (awaitsResponse(ops[(int) y & MASK])) {
                    outstanding++;
                }
            }
            if (fenced && outstanding > 0 || outstanding >= Math.max(1, qp.sraMax)) {
                return false;
            }
        }
        return true;
    }

    /** The one-word operations and FLUSH (its length names the remote range, no payload) are one packet. */
    static boolean onePacket(int op) {
        return Wqe.hasAtomicSegment(op) || op == Wqe.OP_FLUSH;
    }

    /**
     * The operations the responder answers with a response of their own rather than an ACK: READ
     * and the atomics (with data), FLUSH (a zero-length READ response, rxe's
     * {@code send_read_response_ack}). They count against {@code max_rd_atomic} and the fence, and
     * an ACK of a later PSN while their response is missing is an implied NAK.
     */
    static boolean awaitsResponse(int op) {
        return Wqe.readsResponse(op) || op == Wqe.OP_FLUSH;
    }

    /** The first opcode of this QP's transport: RC 0x00, XRC 0xA0 ({@code IB_OPCODE_XRC}). */
    private int base() {
        return qp.serviceType == HcaDevice.ST_XRC ? RxeOpcode.XRC_BASE : 0;
    }

    /** The BTH of request {@code op} (an RC opcode; the transport's block added) and, for XRC, its XRCETH. */
    private int bth(SendWqe w, int op, boolean se, int pad, boolean ackReq, int psn) {
        int code = base() + op;
        RxeHdr.bth(tx.seg, RxeNet.BTH, code, se, pad, RxeHdr.DEFAULT_PKEY, qp.destQpn, ackReq, psn);
        int x = RxeOpcode.offset(code, RxeOpcode.XRCETH);
        if (x > 0) {
            RxeHdr.xrceth(tx.seg, RxeNet.BTH + x, w.xrcSrqn);
        }
        return code;
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
     * Sends packets {@code from}..last of the WQE whose first PSN is {@code firstPsn} and which has
     * {@code npkts} packets ({@code rxe_requester}'s loop with {@code init_req_packet} and
     * {@code finish_packet}); its local data is in {@code req.local}. Null, or the local error that
     * fails the WQE (a source key revoked: LOC_PROT_ERR; a missing on-demand page: PAGE_FAULT).
     */
    private Outcome sendPackets(SendWqe w, WirePort port, int from, int firstPsn, int npkts) {
        int mtu = Math.min(qp.mtu, port.activeMtu);
        int dip = qp.wireDip;
        int sport = RxeNet.udpSport(qp.qpn, qp.destQpn);
        boolean solicited = (w.ctrl & Wqe.CTRL_SOLICITED) != 0;
        switch (w.opcode) {
            case Wqe.OP_RDMA_READ -> {
                long off = (long) from * mtu;
                int code = base() + RxeOpcode.RC_RDMA_READ_REQUEST;
                if (!port.headers(tx, dip, sport, RxeOpcode.length(code))) {
                    return null;
                }
                bth(w, RxeOpcode.RC_RDMA_READ_REQUEST, false, 0, true, firstPsn + from);
                RxeHdr.reth(tx.seg, RxeNet.BTH + RxeOpcode.offset(code, RxeOpcode.RETH), w.remoteAddr + off, w.rkey, w.length - off);
                port.send(tx);
                return null;
            }
            case Wqe.OP_ATOMIC_CS, Wqe.OP_ATOMIC_FA -> {
                int op = w.opcode == Wqe.OP_ATOMIC_CS ? RxeOpcode.RC_COMPARE_SWAP : RxeOpcode.RC_FETCH_ADD;
                if (!port.headers(tx, dip, sport, RxeOpcode.length(base() + op))) {
                    return null;
                }
                int code = bth(w, op, false, 0, true, firstPsn);
                // compare-and-swap: swap then compare; fetch-and-add: the addend in the first field
                long swapAdd = w.opcode == Wqe.OP_ATOMIC_CS ? w.swap : w.compareAdd;
                long cmp = w.opcode == Wqe.OP_ATOMIC_CS ? w.compareAdd : 0;
                RxeHdr.atomicEth(tx.seg, RxeNet.BTH + RxeOpcode.offset(code, RxeOpcode.ATMETH), w.remoteAddr, w.rkey, swapAdd, cmp);
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
            case Wqe.OP_FLUSH -> {
                // rxe's init_req_packet for IB_OPCODE_RC_FLUSH: FETH (feth_init) then RETH with the range; no payload
                int l4 = RxeOpcode.length(RxeOpcode.RC_FLUSH);
                if (!port.headers(tx, dip, sport, l4)) {
                    return null;
                }
                RxeHdr.bth(tx.seg, RxeNet.BTH, RxeOpcode.RC_FLUSH, false, 0, RxeHdr.DEFAULT_PKEY, qp.destQpn, true, firstPsn);
                RxeHdr.feth(tx.seg, RxeNet.BTH + RxeOpcode.offset(RxeOpcode.RC_FLUSH, RxeOpcode.FETH), w.flushType, w.flushLevel);
                RxeHdr.reth(tx.seg, RxeNet.BTH + RxeOpcode.offset(RxeOpcode.RC_FLUSH, RxeOpcode.RETH), w.remoteAddr, w.rkey, w.length);
                port.send(tx);
                return null;
            }
            default -> {
                return sendData(w, port, from, mtu, dip, sport, solicited, firstPsn, npkts);
            }
        }
    }

    /** SEND / WRITE packets {@code from}..last, each payload gathered from the local segments. */
    private Outcome sendData(SendWqe w, WirePort port, int from, int mtu, int dip, int sport, boolean solicited, int firstPsn, int npkts) {
        int[] ops = opcodes(w.opcode);
        Segs src = req.local;
        src.skip((long) from * mtu);
        for (int i = from; i < npkts; i++) {
            boolean first = i == 0;
            boolean last = i == npkts - 1;
            int op = first && last ? ops[3] : first ? ops[0] : last ? ops[2] : ops[1];
            int payload = (int) Math.min(mtu, w.length - (long) i * mtu);
            int pad = -payload & 3;
            int hdrs = RxeOpcode.length(base() + op);
            int l4 = hdrs + payload + pad;
            if (!port.headers(tx, dip, sport, l4)) {
                return null; // the neighbour is being resolved: the retry sends it
            }
            MemorySegment f = tx.seg;
            int code = bth(w, op, last && solicited, pad, last, firstPsn + i);
            int reth = RxeOpcode.offset(code, RxeOpcode.RETH);
            if (reth > 0) {
                RxeHdr.reth(f, RxeNet.BTH + reth, w.remoteAddr, w.rkey, w.length);
            }
            int imm = RxeOpcode.offset(code, RxeOpcode.IMMDT);
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
