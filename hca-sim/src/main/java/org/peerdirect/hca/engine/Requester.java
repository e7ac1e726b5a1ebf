package org.peerdirect.hca.engine;

import java.lang.foreign.Arena;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The requester of one QP ({@code rxe_req.c} with the completer's part of {@code rxe_comp.c}):
 * executes the send queue in order, one thread at a time; runs the responder of the destination
 * QP in its own thread (so a send completes with no hand-off); retries after RNR NAKs and missing
 * acknowledgements through the device {@link Scheduler}; completes WQEs through the CQ writer.
 *
 * <p>A page missing on the requester's own side (an on-demand lkey) raises a WQE page fault and
 * stalls the send queue, with no timer, until the driver's {@code PAGE_FAULT_RESUME}; then the WQE
 * runs again from its start (only the responder's side of an executed atomic is not repeated: see
 * {@link QpResp#atomicReplayPsn}).
 *
 * <p>Lock rules: {@link #wip} admits exactly one thread into the drain loop; the retry counters
 * and the scratch cursors belong to that thread. {@link #stalled} (a timer stall) and
 * {@link #faultToken} (a fault stall) are set by the drain thread and cleared by the timer, the
 * resume command or a move to ERR/RST, each of which then rings the doorbell.
 */
final class Requester extends Exchange {

    private final HwQp qp;
    /**
     * Doorbells not yet drained; non-zero while a thread drains. Incremented (a full fence) before
     * the drain reads the QP state: with {@link #quiesce} (which writes the state first, then reads
     * this) one of the two always sees the other.
     */
    private final AtomicInteger wip = new AtomicInteger();
    private volatile boolean stalled;
    /** The token of the page fault this send queue waits for (0: none). */
    private volatile int faultToken;
    /** Set by a resume with the error flag: the head WQE fails with a local protection error. */
    private volatile boolean faultError;
    private int rnrLeft = -1;
    /** Retries left of the WQE at the head ({@code retry_cnt}); the drain's, also {@link WireReq}'s (it runs in the drain). */
    int retryLeft = -1;
    /** The packet path of a QP whose port is on a wire, made by the drain when it first needs it. */
    volatile WireReq wire;
    /** The completer's scratch on the link's receive thread ({@link WireComp}): its inline source and the atomic's original value. */
    final Segs compSrc = new Segs(1);
    final java.lang.foreign.MemorySegment scratchForComp;
    private final Runnable resume = () -> {
        stalled = false;
        doorbell();
    };

    // the Exchange's scratch belongs to the executing requester (the wip holder); the responder fills remote

    Requester(HwQp qp, Arena arena) {
        super(arena, Math.max(qp.maxSendSge(), HcaDevice.MAX_SGE));
        this.qp = qp;
        this.scratchForComp = arena.allocate(8, 8);
    }

    /**
     * The completer posted a verdict ({@link WireComp}): the send queue runs again. The verdict is
     * written (volatile) before this clears the stall and rings: with {@link #awaitAck}, which sets
     * the stall before it reads the verdict, one of the two always sees the other.
     */
    void wake() {
        stalled = false;
        doorbell();
    }

    /**
     * The WQE's packets are out: wait for the completer's verdict or the local ACK timeout. One
     * timer per QP at a time: an armed one fires at or before the new deadline (deadlines only
     * grow), and the execute it causes re-arms for what is left; so steady traffic, ACKed long
     * before the timeout, schedules one timer per timeout period, not one per WQE.
     */
    private void awaitAck(WireReq wr) {
        if (qp.dev.removed) {
            return;
        }
        stalled = true;
        if (!ackTimerArmed) {
            ackTimerArmed = true;
            if (!qp.dev.scheduler.schedule(ackTimer, wr.remainingNanos())) {
                ackTimerArmed = false;
                stalled = false; // the device is going: the next doorbell flushes
                return;
            }
        }
        if (wr.news()) {
            stalled = false; // the verdict came meanwhile: the loop runs again
            doorbell();
        }
    }

    /** An ACK timer of {@link #awaitAck} is pending. */
    private volatile boolean ackTimerArmed;
    private final Runnable ackTimer = () -> {
        ackTimerArmed = false;
        stalled = false;
        doorbell();
    };

    /** A move to ERR or a destroy: no stall of either kind holds the queue any more (a later resume of its fault finds nothing). */
    void unstall() {
        stalled = false;
        faultToken = 0;
        faultError = false;
    }

    /** {@code PAGE_FAULT_RESUME} of this send queue's fault {@code token}. */
    void resumeFault(int token, boolean error) {
        if (faultToken != token) {
            return; // flushed or reset meanwhile
        }
        faultError = error;
        faultToken = 0;
        doorbell();
    }

    /** Rings the doorbell: the caller (or the thread already executing) drains the send queue. */
    void doorbell() {
        if (wip.getAndIncrement() != 0) {
            return;
        }
        int missed = 1;
        for (;;) {
            try {
                processSq();
            } catch (RuntimeException e) {
                qp.dev.engineFailures.incrementAndGet();
                System.getLogger("org.peerdirect.hca").log(System.Logger.Level.ERROR, qp + ": send queue drain failed", e);
            }
            missed = wip.addAndGet(-missed);
            if (missed == 0) {
                return;
            }
        }
    }

    /**
     * After the QP was moved to ERR or RST: waits until no WQE of it is executing any more, so a
     * key revoked afterwards never fails a WQE that started before (the device flushes instead of
     * reporting protection errors). Bounded (10 s). Called from command paths (modify, destroy,
     * device removal), never from a drain: the drain runs no driver or user code (CQ events only
     * queue), so it never waits for itself.
     */
    void quiesce() {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (wip.get() != 0) {
            if (System.nanoTime() > deadline) {
                System.getLogger("org.peerdirect.hca").log(System.Logger.Level.WARNING, qp + ": still executing a WQE after 10 s");
                return;
            }
            Thread.onSpinWait();
        }
    }

    private void processSq() {
        for (;;) {
            long h = qp.sqHead; // own field: the drain loop is its only writer
            long d = qp.discardTo;
            if (h < d) {
                // a reset or destroy discarded these, also a WQE stalled for a retry
                qp.sqHead(d);
                rnrLeft = -1;
                stalled = false;
                faultToken = 0;
                faultError = false;
                h = d;
            }
            if (stalled || faultToken != 0 || h == qp.sqTail()) {
                return;
            }
            SendWqe w = qp.sqSlot(h);
            HwQpState st = qp.state;
            if (st == HwQpState.ERR) {
                rnrLeft = -1;
                complete(w, h, Outcome.WR_FLUSH_ERR, 0);
                qp.stats.flushed.incrementAndGet();
                qp.sqHead(h + 1);
                continue;
            }
            if (!st.sends()) {
                return;
            }
            if (faultError) {
                faultError = false;
                fail(w, h, Outcome.LOC_PROT_ERR); // the driver could not serve the WQE's page fault
                continue;
            }
            if (rnrLeft < 0) {
                rnrLeft = qp.rnrRetry;
                retryLeft = qp.retryCount;
            }
            if (w.opcode == Wqe.OP_MALFORMED) {
                fail(w, h, Outcome.LOC_QP_OP_ERR);
                continue;
            }
            if (!retire(w, h, execute(w, h))) {
                return;
            }
        }
    }

    /** Executes WQE {@code h} by the QP's service type; an engine bug fails the WQE, not the queue. */
    private Outcome execute(SendWqe w, long h) {
        try {
            return switch (qp.serviceType) {
                case HcaDevice.ST_RC, HcaDevice.ST_XRC -> executeRc(w, h);
                case HcaDevice.ST_REG_UMR -> qp.dev.umr(w);
                default -> executeUd(w);
            };
        } catch (RuntimeException e) {
            // an engine bug must not wedge the queue: the WQE fails, the QP goes to ERR; counted
            // for the test machines' audits (HcaDevice.engineFailures)
            qp.dev.engineFailures.incrementAndGet();
            System.getLogger("org.peerdirect.hca").log(System.Logger.Level.ERROR, qp + ": WQE " + h + " failed", e);
            return Outcome.LOC_QP_OP_ERR;
        }
    }

    /**
     * What WQE {@code h}'s outcome means for the drain ({@code rxe_completer}'s retry and
     * completion rules): true to go on with the next WQE (completed, failed, or the QP in ERR),
     * false to stop here (an RNR back-off or ACK timeout is stalling it, or a page fault waits).
     */
    private boolean retire(SendWqe w, long h, Outcome o) {
        if (o == Outcome.AWAIT_ACK) {
            awaitAck(wire);
            return false;
        }
        if (o == Outcome.RNR_NAK) {
            qp.dev.rnrNaks.incrementAndGet();
            if (qp.rnrRetry != 7 && rnrLeft-- == 0) {
                HcaPort me = qp.dev.ports[qp.portNum - 1];
                me.counters.inc(PortCounters.RNR_NAK_RETRY_ERR);
                WirePort wp = me.wire;
                if (wp != null) {
                    wp.counters.inc(org.peerdirect.hca.wire.RxeCounters.RNR_RETRY_EXCEEDED);
                }
                fail(w, h, Outcome.RNR_RETRY_EXC_ERR);
                return true;
            }
            stall(QpContext.rnrTimerNanos(rnrTimerOfPeer()));
            return false;
        }
        if (o == Outcome.PAGE_FAULT) {
            if (!raiseFault(h)) {
                fail(w, h, Outcome.LOC_PROT_ERR); // no one serves faults
                return true;
            }
            return false;
        }
        if (o == Outcome.NO_ACK) {
            qp.dev.retries.incrementAndGet();
            if (retryLeft-- == 0) {
                qp.dev.ports[qp.portNum - 1].counters.inc(PortCounters.LOCAL_ACK_TIMEOUT_ERR);
                fail(w, h, Outcome.RETRY_EXC_ERR);
                return true;
            }
            stall(QpContext.ackTimeoutNanos(qp.ackTimeout));
            return false;
        }
        rnrLeft = -1;
        if (o != Outcome.SUCCESS) {
            fail(w, h, o);
            return true;
        }
        qp.stats.completed.incrementAndGet();
        if ((w.ctrl & Wqe.CTRL_CQ_UPDATE) != 0 || qp.sqSigAll) {
            if (!complete(w, h, Outcome.SUCCESS, (int) w.length)) {
                qp.sqHead(h + 1);
                qp.transportError();
                return true;
            }
        }
        qp.sqHead(h + 1);
        return true;
    }

    private void fail(SendWqe w, long h, Outcome o) {
        rnrLeft = -1;
        qp.stats.errors.incrementAndGet();
        complete(w, h, o, 0);
        qp.sqHead(h + 1);
        qp.transportError();
    }

    private int rnrTimerOfPeer() {
        WireReq wr = wire;
        if (wr != null && wr.rnrTimer >= 0) {
            return wr.rnrTimer; // on a wire: the timer the RNR NAK carried
        }
        HwQp r = HcaPort.resolve(qp.dev, qp.dlid, qp.destQpn);
        return r == null ? 12 : r.minRnrTimer;
    }

    private void stall(long nanos) {
        if (qp.dev.removed) {
            return; // the device is going away: the next doorbell flushes
        }
        stalled = true;
        if (!qp.dev.scheduler.schedule(resume, nanos)) {
            stalled = false;
        }
    }

    /**
     * The WQE at {@code h} met a page missing on this side ({@link #local} recorded where): stalls
     * the send queue on a new fault and raises the WQE page-fault event. False when the device has
     * no page-fault handler.
     */
    private boolean raiseFault(long h) {
        int token = qp.dev.pendingFault(qp, true, PageFault.SUBTYPE_WQE);
        if (token == 0) {
            return false;
        }
        faultToken = token; // before the event: a resume racing it finds the token set
        qp.dev.raise(local.faultEvent(token, PageFault.SUBTYPE_WQE, PageFault.FLAG_REQUESTOR, qp.qpn, h));
        return true;
    }

    private boolean complete(SendWqe w, long index, Outcome o, int byteLen) {
        return qp.scq.push(qp.qpn, true, index, w.opcode, o, byteLen, 0, 0, 0, 0, false);
    }

    /** Resolves the local data segments into {@link #local}; an error outcome or null. */
    private Outcome gatherLocal(SendWqe w, boolean needWrite) {
        local.reset(qp.dev);
        if ((w.ctrl & Wqe.CTRL_INLINE) != 0) {
            local.inline(w.inline, 0, w.inlineLen);
            return null;
        }
        for (int i = 0; i < w.numSge; i++) {
            long l = w.byteCount[i] & 0xFFFF_FFFFL;
            if (l == 0) {
                continue;
            }
            Mpt m = qp.dev.mpt(w.lkey[i]);
            int g = m == null ? -1 : m.admit(qp.pdn, w.addr[i], l, needWrite ? HcaDevice.PERM_LOCAL_WRITE : 0);
            if (g < 0) {
                return Outcome.LOC_PROT_ERR;
            }
            local.add(m, w.addr[i], l, g);
        }
        return null;
    }

    /** This QP's packet path, made on first use (the drain's thread: one writer). */
    private WireReq wire() {
        WireReq wr = wire;
        if (wr == null) {
            wr = new WireReq(qp, this);
            wire = wr;
        }
        return wr;
    }

    /**
     * An RC WQE's local checks, and its local data gathered into {@link #local}: null, or the
     * outcome that fails it. Also the wire's send window's, for each WQE it sends (the drain's thread).
     */
    Outcome prepareRc(SendWqe w) {
        long len = w.length;
        // longer than the device's max_msg_sz; a FLUSH's length names a remote range (up to 2^31), it carries no data
        if (len > (w.opcode == Wqe.OP_FLUSH ? 0x8000_0000L : HcaDevice.MAX_MSG_SZ)) {
            return Outcome.LOC_LEN_ERR;
        }
        boolean atomic = Wqe.isAtomic(w.opcode);
        if ((w.ctrl & Wqe.CTRL_INLINE) != 0 && Wqe.readsResponse(w.opcode)) {
            // a READ's data or an atomic's original value has nowhere to land: a malformed WQE,
            // refused before anything is sent (the responder must not execute the atomic)
            return Outcome.LOC_QP_OP_ERR;
        }
        Outcome o = gatherLocal(w, Wqe.readsResponse(w.opcode));
        if (o != null) {
            return o;
        }
        if (atomic && (local.n != 1 || len != 8)) {
            return Outcome.LOC_LEN_ERR;
        }
        if (w.opcode == Wqe.OP_ATOMIC_WRITE && (local.n != 0 || len != 8)) {
            return Outcome.LOC_LEN_ERR; // the 8 bytes travel in the WQE: no gather list
        }
        if (w.opcode == Wqe.OP_FLUSH && (local.n != 0 || (w.ctrl & Wqe.CTRL_INLINE) != 0)) {
            return Outcome.LOC_LEN_ERR; // FLUSH carries no data (oA19-2)
        }
        return null;
    }

    private Outcome executeRc(SendWqe w, long h) {
        HcaPort me = qp.dev.ports[qp.portNum - 1];
        WirePort wp = me.wire;
        WireReq wr = wire;
        if (wp != null && wr != null && wr.inWindow(h)) {
            return wr.execute(w, h, wp); // already on the wire: its acknowledgement, verdict or retransmission
        }
        long len = w.length;
        boolean atomic = Wqe.isAtomic(w.opcode);
        Outcome o = prepareRc(w);
        if (o != null) {
            return o;
        }
        if (wp != null) {
            // the port is on a wire: packets, acknowledgements, retransmission (the seam of the two paths)
            if (!me.active) {
                return Outcome.NO_ACK; // a port that is down sends nothing
            }
            if (qp.serviceType == HcaDevice.ST_XRC && (w.opcode == Wqe.OP_FLUSH || w.opcode == Wqe.OP_ATOMIC_WRITE)) {
                return Outcome.LOC_QP_OP_ERR; // the IBA has no XRC opcode for them (IB_OPCODE_RC_FLUSH / _ATOMIC_WRITE only)
            }
            return wire().execute(w, h, wp);
        }
        HwQp r = HcaPort.resolve(qp.dev, qp.dlid, qp.destQpn);
        // RC answers RC; an XRC initiator is answered by an XRC target (nothing else answers either)
        boolean peerType = qp.serviceType == HcaDevice.ST_RC ? r != null && r.serviceType == HcaDevice.ST_RC
                : r != null && r.serviceType == HcaDevice.ST_XRC && r.xrcTarget;
        // the one-word operations and FLUSH (its length names the remote range, no payload) are one packet
        int packets = WireReq.onePacket(w.opcode) ? 1 : (int) Math.max(1, (len + qp.mtu - 1) / qp.mtu);
        if (!me.active) {
            return Outcome.NO_ACK; // a port that is down sends nothing
        }
        HcaPort peer = r == null ? null : r.dev.ports[r.portNum - 1];
        if (r == null || !peer.active || !peerType || r.destQpn != qp.qpn || r.dlid != me.lid || !r.resp.enter()) {
            countRequest(me, null, w, len, packets); // sent, and lost
            return Outcome.NO_ACK;
        }
        try {
            return respondRc(w, r, me, peer, len, packets, atomic);
        } finally {
            r.resp.exit(); // after the receive CQE, the expected PSN, the move to ERR: a reset of r waits for this
        }
    }

    /** {@link #executeRc}'s exchange with responder {@code r} (inside its responder: {@link QpResp#enter}). */
    private Outcome respondRc(SendWqe w, HwQp r, HcaPort me, HcaPort peer, long len, int packets, boolean atomic) {
        countRequest(me, peer, w, len, packets);
        boolean duplicate = false;
        if (r.resp.ePsn != qp.sqPsn) {
            // a duplicate of an atomic the responder executed and remembered: replayed, not repeated
            duplicate = atomic && r.resp.atomicReplayPsn == qp.sqPsn && r.resp.ePsn == ((qp.sqPsn + 1) & 0xFFFFFF);
            if (!duplicate) {
                peer.counters.inc(PortCounters.OUT_OF_SEQUENCE);
                PortCounters.fabric(peer, me, 1, 0); // the sequence NAK
                return Outcome.NO_ACK; // out-of-sequence NAK: the requester retransmits; misconfigured PSNs end in RETRY_EXC_ERR
            }
            peer.counters.inc(PortCounters.DUPLICATE_REQUEST);
        }
        xrcSrq = null;
        if (r.xrcTarget) {
            // the XRCETH's SRQ must be one of the target's XRC domain; a request naming another is
            // dropped before the transport looks at it (no NAK is defined for it: the XRC series
            // for rxe drops it in check_xrcd), so the requester retries and ends in RETRY_EXC_ERR
            HwSrq s = r.dev.srq(w.xrcSrqn);
            if (s == null || s.xrcdn != r.xrcdn) {
                return Outcome.NO_ACK;
            }
            xrcSrq = s;
        }
        r.resp.receivedInRtr();
        errorInReceiveCqe = false;
        from(qp);
        Outcome o = duplicate ? Responder.replayAtomic(r, this) : Responder.respondRc(r, this, w, len);
        if (o.responderFatal()) {
            r.transportError(); // as rxe's do_class_ac_error
            if (!errorInReceiveCqe) {
                // IBA 11.6.3: an error no receive completion reports is the responder QP's affiliated event
                r.dev.asyncEvent(o.responderEvent(), r.qpn);
            }
        }
        countResponse(peer, me, w, len, o);
        if (o == Outcome.RNR_NAK) {
            peer.counters.inc(PortCounters.RNR_NAK_SENT);
            me.counters.inc(PortCounters.RNR_NAK_RCVD);
        }
        if (o != Outcome.RNR_NAK && o != Outcome.PAGE_FAULT) {
            qp.sqPsn = (qp.sqPsn + packets) & 0xFFFFFF;
            if (!duplicate) {
                r.resp.ePsn = (r.resp.ePsn + packets) & 0xFFFFFF;
            }
        }
        return o;
    }

    /**
     * The request packets of {@code w} on the fabric: a READ's request is one packet without
     * payload, everything else carries its message; the responder counts what the request asks of
     * it ({@code rx_write_requests}, ...). {@code to} null: the packets went nowhere.
     */
    private static void countRequest(HcaPort from, HcaPort to, SendWqe w, long len, int packets) {
        boolean read = w.opcode == Wqe.OP_RDMA_READ;
        boolean payload = !read && w.opcode != Wqe.OP_FLUSH;
        PortCounters.fabric(from, to, read ? 1 : packets, payload ? (Wqe.isAtomic(w.opcode) ? 0 : len) : 0);
        if (to != null) {
            if (read) {
                to.counters.inc(PortCounters.RX_READ_REQUESTS);
            } else if (Wqe.isAtomic(w.opcode)) {
                to.counters.inc(PortCounters.RX_ATOMIC_REQUESTS);
            } else if (w.opcode == Wqe.OP_RDMA_WRITE || w.opcode == Wqe.OP_RDMA_WRITE_IMM) {
                to.counters.inc(PortCounters.RX_WRITE_REQUESTS);
            }
        }
    }

    /**
     * The responder's answer on the fabric: a READ's data in its packets, an atomic's one response
     * with the original value (8 octets), otherwise one acknowledgement (or NAK) without payload;
     * a responder-side page fault answers with an RNR NAK too.
     */
    private void countResponse(HcaPort from, HcaPort to, SendWqe w, long len, Outcome o) {
        if (w.opcode == Wqe.OP_RDMA_READ && o == Outcome.SUCCESS) {
            PortCounters.fabric(from, to, (int) Math.max(1, (len + qp.mtu - 1) / qp.mtu), len);
        } else if (Wqe.isAtomic(w.opcode) && o == Outcome.SUCCESS) {
            PortCounters.fabric(from, to, 1, 8);
        } else {
            PortCounters.fabric(from, to, 1, 0);
        }
    }

    private Outcome executeUd(SendWqe w) {
        long len = w.length;
        if (len > qp.mtu) {
            return Outcome.LOC_LEN_ERR;
        }
        Outcome o = gatherLocal(w, false);
        if (o != null) {
            return o;
        }
        HcaPort me = qp.dev.ports[qp.portNum - 1];
        WirePort wp = me.wire;
        if (wp != null) {
            return me.active ? wire().sendUd(w, wp) : Outcome.SUCCESS;
        }
        HwQp r = HcaPort.resolve(qp.dev, w.dlid, w.remoteQpn);
        if (!me.active) {
            return Outcome.SUCCESS; // unreliable: the datagram is lost, the send still completes
        }
        if (r == null || r.serviceType != HcaDevice.ST_UD || !r.dev.ports[r.portNum - 1].active || !r.resp.enter()) {
            PortCounters.fabric(me, null, 1, len);
            return Outcome.SUCCESS;
        }
        try {
            return deliverUd(w, r, me, len);
        } finally {
            r.resp.exit();
        }
    }

    /** {@link #executeUd}'s delivery to {@code r} (inside its responder: {@link QpResp#enter}). */
    private Outcome deliverUd(SendWqe w, HwQp r, HcaPort me, long len) {
        PortCounters.fabric(me, r.dev.ports[r.portNum - 1], 1, len);
        int useQkey = w.remoteQkey < 0 ? qp.qkey : w.remoteQkey;
        if (useQkey != r.qkey) {
            return Outcome.SUCCESS; // Q_Key mismatch: silently dropped at the receiver
        }
        from(qp);
        return Responder.deliverUd(r, this, w, len);
    }
}
