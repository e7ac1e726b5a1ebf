package org.peerdirect.hca.engine;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A QP context and its hardware state machine ({@code rxe_qp.c}'s part): identity, queues, the
 * attributes the transition commands set, and the doorbells. The responder's state is
 * {@link QpResp} ({@code qp->resp}). Executing the send queue is the
 * {@link Requester}'s job, answering requests the {@link Responder}'s, moving bytes the
 * {@link DmaMover}'s; completions go through the CQ writer ({@link HwCq#push}).
 *
 * <p>Lock rules.
 * <ul>
 * <li>{@code this} guards transition commands (the context and state changes other than the
 * transport's move to ERR, a compare-and-set that a concurrent command cannot undo, as commands
 * move with a compare-and-set too, and that leaves a QP in RST alone: {@link #transportError}).</li>
 * <li>The send queue has one producer at a time (the driver's post lock) and one consumer (the
 * requester's drain loop); they meet through the {@link #sqTail} doorbell record and
 * {@link #sqHead}, each written with release and read with acquire by the other side.</li>
 * <li>The receive queue: see {@link RecvQueue}.</li>
 * <li>The responder's state ({@link QpResp}, {@code rxe_resp_info}) counts the threads inside this
 * QP's responder (a peer's requester, the wire's receive thread); a move to RESET, a destroy and a
 * device removal wait for it to reach zero after changing the state ({@link QpResp#awaitIdle}).</li>
 * </ul>
 */
public final class HwQp {

    final HcaDevice dev;
    public final int qpn;
    final int pdn;
    final int serviceType;
    final HwCq scq;
    final HwCq rcq;
    final HwSrq srq;
    /**
     * XRC ({@link HcaDevice#ST_XRC}): the QP's XRC domain (-1 for other types) and its role. An
     * XRC initiator ("XRC send") QP has a send queue and no receive side; an XRC target ("XRC
     * receive") QP has neither queue nor CQs: it answers an initiator, and each message it takes
     * names the XRC SRQ of its domain that receives it.
     */
    final int xrcdn;
    final boolean xrcTarget;
    final boolean sqSigAll;
    private final int maxSendSge;
    private final int maxInline;
    final RecvQueue rq;
    final SendWqe[] sq;
    private final int sqMask;
    /** Requester's consumer index; written only by the drain loop (release), see {@link #sqHead()}. */
    long sqHead;
    /** The send doorbell record: the driver's producer index (release), see {@link #sqTail()}. */
    long sqTail;
    private static final VarHandle SQ_HEAD;
    private static final VarHandle SQ_TAIL;
    /** WQEs below this were discarded by a reset or destroy: the drain loop skips them. */
    volatile long discardTo;

    /** Guarded by this. */
    private final QpContext ctx = new QpContext();
    volatile HwQpState state = HwQpState.RST;
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(HwQp.class, "state", HwQpState.class);
            SQ_HEAD = MethodHandles.lookup().findVarHandle(HwQp.class, "sqHead", long.class);
            SQ_TAIL = MethodHandles.lookup().findVarHandle(HwQp.class, "sqTail", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    // data-path copies of the context, written by transition commands
    volatile int dlid;
    /** On a wire: the peer's IPv4 address from the path's GID (0: none, the GID is not IPv4-mapped). */
    volatile int wireDip;
    volatile int destQpn;
    volatile int portNum = 1;
    volatile int remoteAccess;
    volatile int qkey;
    volatile int mtu = HcaDevice.MTU;
    volatile int minRnrTimer;
    volatile int ackTimeout;
    volatile int retryCount;
    volatile int rnrRetry;
    /** Outstanding RDMA READs and atomics the requester may have ({@code max_rd_atomic}; the wire's send window). */
    volatile int sraMax = 1;
    /** Next PSN to send: the requester's. */
    int sqPsn;

    final Requester requester;
    /** The responder's state ({@code qp->resp}). */
    final QpResp resp = new QpResp(this);
    final Counters stats = new Counters();
    private final AtomicBoolean destroyedOnce = new AtomicBoolean();
    /** A poll of the receive doorbell record in ERR is scheduled ({@link #pollRqInError}). */
    private final AtomicBoolean errRqPoll = new AtomicBoolean();

    /**
     * How often a QP in ERR whose receive queue is in host memory reads its doorbell record for
     * WQEs posted after the move to ERR. Such a queue has no doorbell register: the hardware learns
     * of new receive WQEs only when it reads the record, which in RTR/RTS it does when a message
     * needs one; in ERR no message comes, yet {@code ib_drain_rq} posts a receive to an errored QP
     * and waits for its flush completion. 200 µs: a drain ends within a fraction of a millisecond,
     * and an errored QP left alone costs one 4-byte DMA read per period.
     */
    static final long ERR_RQ_POLL_NANOS = 200_000;

    /** Counters a tool or test can read. */
    public static final class Counters {
        public final AtomicLong completed = new AtomicLong();
        public final AtomicLong errors = new AtomicLong();
        public final AtomicLong flushed = new AtomicLong();
        /** Moves to RESET (or destroys) that found a responder of the QP running and waited for it ({@link QpResp#awaitIdle}). */
        public final AtomicLong responderWaits = new AtomicLong();
    }

    /**
     * {@code rxe_qp_chk_init}: a QP of service type RC, UD or REG_UMR, its CQs and SRQ live and of
     * device {@code dev}, its caps within the device's.
     */
    static void checkInit(HcaDevice dev, int serviceType, QpCaps caps, HwCq scq, HwCq rcq, HwSrq srq) {
        if (serviceType != HcaDevice.ST_RC && serviceType != HcaDevice.ST_UD && serviceType != HcaDevice.ST_REG_UMR) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, dev.name + ": QP service type " + serviceType
                    + " is not RC, UD or REG_UMR (XRC QPs: createXrcQp)");
        }
        if (scq == null || rcq == null || scq.dev != dev || rcq.dev != dev || srq != null && srq.dev != dev) {
            throw new HwCommandException(HwCommandException.STAT_BAD_RESOURCE, dev.name + ": a QP's CQs and SRQ must be of this device");
        }
        if (caps.maxSendWr() < 1 || caps.maxSendWr() > HcaDevice.MAX_QP_WR || caps.maxRecvWr() < 0 || caps.maxRecvWr() > HcaDevice.MAX_QP_WR
                || caps.maxSendSge() < 1 || caps.maxSendSge() > HcaDevice.MAX_SGE || caps.maxRecvSge() < 0
                || caps.maxRecvSge() > HcaDevice.MAX_SGE || caps.maxInlineData() < 0 || caps.maxInlineData() > HcaDevice.MAX_INLINE) {
            throw new HwCommandException(HwCommandException.STAT_BAD_SIZE, String.format(
                    "%s: QP caps (%d/%d WRs, %d/%d SGEs, %d inline) exceed the device (%d WRs, %d SGEs, %d inline)",
                    dev.name, caps.maxSendWr(), caps.maxRecvWr(), caps.maxSendSge(), caps.maxRecvSge(), caps.maxInlineData(),
                    HcaDevice.MAX_QP_WR, HcaDevice.MAX_SGE, HcaDevice.MAX_INLINE));
        }
        if (scq.isDestroyed() || rcq.isDestroyed() || srq != null && srq.destroyed) {
            throw new HwCommandException(HwCommandException.STAT_BAD_RES_STATE, dev.name + ": a CQ or the SRQ of the new QP is destroyed");
        }
    }

    /** {@code rxe_qp_chk_init} for an XRC initiator: a live send CQ of {@code dev}, send caps within the device's. */
    static void checkXrcInit(HcaDevice dev, QpCaps c, HwCq scq) {
        if (scq == null || scq.dev != dev || scq.isDestroyed()) {
            throw new HwCommandException(HwCommandException.STAT_BAD_RESOURCE, dev.name + ": an XRC send QP needs a live send CQ of this device");
        }
        if (c.maxSendWr() < 1 || c.maxSendWr() > HcaDevice.MAX_QP_WR || c.maxSendSge() < 1 || c.maxSendSge() > HcaDevice.MAX_SGE
                || c.maxInlineData() < 0 || c.maxInlineData() > HcaDevice.MAX_INLINE) {
            throw new HwCommandException(HwCommandException.STAT_BAD_SIZE, String.format("%s: XRC QP caps (%d WRs, %d SGEs, %d inline) exceed the device",
                    dev.name, c.maxSendWr(), c.maxSendSge(), c.maxInlineData()));
        }
    }

    HwQp(HcaDevice dev, int qpn, int pdn, int serviceType, QpCaps caps, HwCq scq, HwCq rcq, HwSrq srq) {
        this(dev, qpn, pdn, serviceType, -1, false, caps, scq, rcq, srq);
    }

    HwQp(HcaDevice dev, int qpn, int pdn, int serviceType, int xrcdn, boolean xrcTarget, QpCaps caps, HwCq scq, HwCq rcq, HwSrq srq) {
        this.dev = dev;
        this.qpn = qpn;
        this.pdn = pdn;
        this.serviceType = serviceType;
        this.xrcdn = xrcdn;
        this.xrcTarget = xrcTarget;
        this.scq = scq;
        this.rcq = rcq;
        this.srq = srq;
        this.sqSigAll = caps.sqSigAll();
        this.maxSendSge = caps.maxSendSge();
        this.maxInline = caps.maxInlineData();
        this.rq = srq == null && serviceType != HcaDevice.ST_XRC ? new RecvQueue(caps.maxRecvWr(), caps.maxRecvSge()) : null;
        Arena arena = Arena.ofAuto();
        this.sq = new SendWqe[HcaDevice.roundUpPow2(caps.maxSendWr())];
        this.sqMask = sq.length - 1;
        for (int i = 0; i < sq.length; i++) {
            sq[i] = new SendWqe(caps.maxSendSge(), maxInline > 0 ? arena.allocate(maxInline) : MemorySegment.NULL);
        }
        this.requester = new Requester(this, arena);
    }

    public int qpn() {
        return qpn;
    }

    public HwQpState state() {
        return state;
    }

    public int serviceType() {
        return serviceType;
    }

    public int pdn() {
        return pdn;
    }

    /** An XRC QP's domain (-1 for other types). */
    public int xrcdn() {
        return xrcdn;
    }

    /** An XRC target (receive) QP: no queues, receives go to the XRC SRQ each message names. */
    public boolean xrcTarget() {
        return xrcTarget;
    }

    public int maxSendSge() {
        return maxSendSge;
    }

    public int maxInlineData() {
        return maxInline;
    }

    // ------------------------------------------------------------------ transition commands

    /**
     * Executes a QP transition command with the driver's context. The hardware checks the command
     * against the QP's state ({@link HwCommandException#STAT_BAD_QP_STATE}) and the context's fields
     * ({@link HwCommandException#STAT_BAD_PARAM}); nothing changes when it refuses.
     */
    public synchronized void modify(QpCommand cmd, QpContext c) {
        dev.alive();
        if (destroyedOnce.get()) {
            throw new HwCommandException(HwCommandException.STAT_BAD_RESOURCE, String.format("QP 0x%x was destroyed", qpn));
        }
        HwQpState cur = state;
        if (!cmd.acceptedIn(cur)) {
            throw new HwCommandException(HwCommandException.STAT_BAD_QP_STATE, String.format("QP 0x%x: %s_QP (0x%x) in state %s", qpn,
                    cmd, cmd.opcode, cur));
        }
        if (cmd != QpCommand.TO_ERR && cmd != QpCommand.TO_RST) {
            dev.port(c.port);
            param(c.mtu >= 1 && c.mtu <= 5, "path MTU code " + c.mtu + " is not 1 (256) .. 5 (4096)");
            param(c.retryCount >= 0 && c.retryCount <= 7, "retry_count " + c.retryCount + " is not 0..7");
            param(c.rnrRetry >= 0 && c.rnrRetry <= 7, "rnr_retry " + c.rnrRetry + " is not 0..7");
            param(c.minRnrTimer >= 0 && c.minRnrTimer <= 31, "min_rnr_timer " + c.minRnrTimer + " is not 0..31");
            param(c.ackTimeout >= 0 && c.ackTimeout <= 31, "ack_timeout " + c.ackTimeout + " is not 0..31");
            // PSNs are taken only by the transitions that set them (INIT2RTR, *2RTS)
            int rqPsnBefore = ctx.rqPsn;
            int sqPsnBefore = ctx.sqPsn;
            ctx.copyFrom(c);
            ctx.rqPsn = rqPsnBefore;
            ctx.sqPsn = sqPsnBefore;
            if (cmd == QpCommand.INIT2RTR) {
                ctx.rqPsn = c.rqPsn & 0xFFFFFF;
                resp.ePsn = ctx.rqPsn;
            }
            if (cmd.to == HwQpState.RTS && cmd != QpCommand.RTS2RTS) {
                ctx.sqPsn = c.sqPsn & 0xFFFFFF;
                sqPsn = ctx.sqPsn;
            }
            portNum = ctx.port;
            mtu = 128 << ctx.mtu;
            remoteAccess = ctx.remoteAccess;
            qkey = ctx.qkey;
            dlid = ctx.dlid;
            wireDip = WirePort.ipOfGid(ctx.rgid);
            destQpn = ctx.remoteQpn;
            minRnrTimer = ctx.minRnrTimer;
            ackTimeout = ctx.ackTimeout;
            retryCount = ctx.retryCount;
            rnrRetry = ctx.rnrRetry;
            sraMax = ctx.sraMax;
        }
        switch (cmd.to) {
            case RST -> {
                reset();
                requester.quiesce();
                resp.awaitIdle(); // a peer's request inside the responder: its receive CQE lands before the command returns
            }
            case ERR -> {
                toError();
                requester.quiesce();
            }
            default -> {
                if (cmd.to != cur && !STATE.compareAndSet(this, cur, cmd.to)) {
                    // the transport moved the QP to ERR meanwhile: that wins
                    throw new HwCommandException(HwCommandException.STAT_BAD_QP_STATE, String.format("QP 0x%x: moved to %s meanwhile",
                            qpn, state));
                }
                if (cmd == QpCommand.INIT2RTR) {
                    WirePort w = dev.ports[portNum - 1].wire;
                    if (w != null && wireDip != 0) {
                        w.resolve(wireDip); // as rxe resolves the peer's MAC when the QP gets its path
                    }
                }
                if (cmd.to == HwQpState.RTS) {
                    requester.doorbell();
                }
            }
        }
    }

    private void param(boolean ok, String what) {
        if (!ok) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format("QP 0x%x: %s", qpn, what));
        }
    }

    /** {@code QUERY_QP}: a copy of the context. */
    public synchronized QpContext context() {
        QpContext c = ctx.copy();
        c.sqPsn = sqPsn;
        return c;
    }

    /** To RST: both queues emptied without completions, as the hardware does. */
    private void reset() {
        state = HwQpState.RST;
        resp.reset();
        discardTo = sqTail();
        requester.doorbell(); // the drain loop applies the discard
        if (rq != null) {
            rq.discard();
        }
    }

    /** To ERR (the 2ERR command, a device going away): outstanding receive WQEs flush now, send WQEs as the queue drains. */
    void toError() {
        moveToError((HwQpState) STATE.getAndSet(this, HwQpState.ERR));
    }

    /**
     * The transport's move to ERR (a WQE that failed, a responder's error, a completion that found
     * its CQ full): as {@link #toError}, except that a QP in RST stays there. A 2RST_QP sets RST and
     * then waits for the WQE executing ({@link Requester#quiesce}); that WQE failing meanwhile must
     * not undo the RESET the command is about to return (an engine QP kept across RESET would be
     * left in ERR, its receive poll reading the doorbell record the driver resets).
     */
    void transportError() {
        HwQpState was;
        do {
            was = state;
            if (was == HwQpState.RST) {
                return;
            }
        } while (!STATE.compareAndSet(this, was, HwQpState.ERR));
        moveToError(was);
    }

    private void moveToError(HwQpState was) {
        if (rq != null) {
            long before = rq.consumerIndex();
            rq.flush(rcq, qpn, this::flushing);
            stats.flushed.addAndGet(rq.consumerIndex() - before);
            if (rq.inHostMemory() && errRqPoll.compareAndSet(false, true) && !dev.scheduler.schedule(this::pollRqInError, ERR_RQ_POLL_NANOS)) {
                errRqPoll.set(false); // the device is going away
            }
        }
        requester.unstall();
        requester.doorbell();
        if (was != HwQpState.ERR && srq != null) {
            dev.asyncEvent(AsyncEventHandler.SRQ_LAST_WQE, qpn); // once per move to ERR: the SRQ feeds it no more
        }
    }

    /**
     * The scheduler's poll of a host-memory receive queue in ERR: WQEs the driver posted since
     * (its doorbell record) complete with WR_FLUSH_ERR; again after {@link #ERR_RQ_POLL_NANOS}
     * while the QP stays in ERR. Ends when it leaves ERR (RST), is destroyed, or the device goes.
     * The re-check after clearing {@link #errRqPoll} closes the race with a concurrent
     * {@link #toError} that saw the poll still scheduled and did not schedule one.
     */
    private void pollRqInError() {
        if (state == HwQpState.ERR && !destroyedOnce.get()) {
            long before = rq.consumerIndex();
            rq.flush(rcq, qpn, this::flushing);
            stats.flushed.addAndGet(rq.consumerIndex() - before);
            if (dev.scheduler.schedule(this::pollRqInError, ERR_RQ_POLL_NANOS)) {
                return; // still armed: the next run polls again
            }
            // rejected: the device is going away
        }
        errRqPoll.set(false);
        if (state == HwQpState.ERR && !destroyedOnce.get() && errRqPoll.compareAndSet(false, true)
                && !dev.scheduler.schedule(this::pollRqInError, ERR_RQ_POLL_NANOS)) {
            errRqPoll.set(false);
        }
    }

    /**
     * Whether the receive queue's WQEs flush: in ERR and not destroyed. Read under the queue's
     * consumer lock ({@link RecvQueue#flush}), which {@link #reset} and {@link #destroy} take after
     * changing what it reads.
     */
    private boolean flushing() {
        return state == HwQpState.ERR && !destroyedOnce.get();
    }

    // ------------------------------------------------------------------ queues and doorbells

    /** Send queue slots: the requested count rounded up to a power of two. */
    public int sqSize() {
        return sq.length;
    }

    /** The send WQE slot of index {@code index} (the driver fills it, then rings past it). */
    public SendWqe sqSlot(long index) {
        return sq[(int) index & sqMask];
    }

    /** Slots below this index are free again (executed or discarded). */
    public long sqConsumerIndex() {
        return Math.max(sqHead(), discardTo);
    }

    /**
     * The send doorbell record: WQEs below {@code producerIndex} are ready. Written by the one
     * producer (under the driver's post lock), never backwards.
     */
    public void sqDoorbellRecord(long producerIndex) {
        SQ_TAIL.setRelease(this, producerIndex);
    }

    /** The doorbell record as the hardware reads it. */
    long sqTail() {
        return (long) SQ_TAIL.getAcquire(this);
    }

    long sqHead() {
        return (long) SQ_HEAD.getAcquire(this);
    }

    /** The drain loop's consumer index moves on (release: the slot may be refilled). */
    void sqHead(long h) {
        SQ_HEAD.setRelease(this, h);
    }

    /**
     * The doorbell register write: the requester drains what the record shows, in the caller's
     * thread unless another thread is already draining (then that one picks the new WQEs up).
     * Rung after the driver released its post lock, so posters of the same QP do not wait for the
     * transport.
     */
    public void ringSqDoorbell() {
        requester.doorbell();
    }

    /** The QP's own receive queue, or null when it uses an SRQ. */
    public RecvQueue recvQueue() {
        return rq;
    }

    /** The receive doorbell record; in ERR the new WQEs flush at once. */
    public void rqDoorbell(long producerIndex) {
        if (rq == null) {
            return; // no receive queue of its own (SRQ or XRC): nothing the doorbell could name
        }
        rq.doorbell(producerIndex);
        if (state == HwQpState.ERR) {
            rq.flush(rcq, qpn, this::flushing);
        }
    }

    // ------------------------------------------------------------------ destroy

    /** {@code 2RST_QP} and free: completions of a destroyed QP are not reported. Idempotent. */
    public void destroy() {
        if (!destroyedOnce.compareAndSet(false, true)) {
            return;
        }
        synchronized (this) {
            state = HwQpState.ERR;
        }
        if (rq != null) {
            rq.discard(); // under the consumer lock: a flush that checked before destroyedOnce has ended
        }
        discardTo = sqTail();
        requester.doorbell();
        requester.quiesce();
        resp.awaitIdle();
        dev.destroyed(this);
    }

    /** Waits until no WQE of this QP is executing and no request is inside its responder (after a move to ERR or RST). */
    void quiesce() {
        requester.quiesce();
        resp.awaitIdle();
    }

    /** Send WQEs rung and not yet completed. */
    public long outstandingSends() {
        return sqTail() - sqConsumerIndex();
    }

    public Counters stats() {
        return stats;
    }

    @Override
    public String toString() {
        String type = switch (serviceType) {
            case HcaDevice.ST_RC -> "RC";
            case HcaDevice.ST_UD -> "UD";
            case HcaDevice.ST_XRC -> xrcTarget ? "XRC_TGT" : "XRC_INI";
            default -> "REG_UMR";
        };
        return String.format("%s QP 0x%x (%s, %s)", dev.name, qpn, type, state);
    }
}
