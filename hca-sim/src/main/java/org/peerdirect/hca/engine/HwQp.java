package org.peerdirect.hca.engine;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.iommu.IommuFault;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * A queue pair and its transport: the requester side executes the send queue in order; the
 * responder side is executed by the requester of the connected QP (RC) or of any sender (UD),
 * in that requester's thread, so a send completes with no thread hand-off.
 *
 * <p>Lock rules.
 * <ul>
 * <li>{@link #postLock}: producers of the send queue (post_send).</li>
 * <li>{@link #wip}: exactly one thread at a time executes the send queue (the drain loop of
 * {@link #doorbell}); {@link #stalled}, the retry counters and the scratch cursors belong to it.</li>
 * <li>the receive queue's lock (own RQ or SRQ): producers (post_recv) and the consuming
 * responder; it is taken while holding nothing but possibly the requester's {@link #wip}.</li>
 * <li>MPT read locks are taken per chunk in key order; CQ locks are leaves.</li>
 * <li>{@code this} guards modify (attributes and state changes).</li>
 * </ul>
 */
public final class HwQp implements IbvQp {

    /**
     * Internal outcomes of executing a WQE that does not complete now. They reuse two statuses of
     * the RD transport (EE contexts), which RC and UD never report: RNR NAK (back off, retry) and
     * a lost packet (retransmit after the ACK timeout).
     */
    private static final IbvWcStatus RNR = IbvWcStatus.INV_EECN_ERR;
    private static final IbvWcStatus LOST = IbvWcStatus.INV_EEC_STATE_ERR;

    static final class SendWqe {
        long wrId;
        IbvWrOpcode opcode;
        int flags;
        int imm;
        long remoteAddr;
        int rkey;
        long compareAdd;
        long swap;
        int dlid;
        int remoteQpn;
        int remoteQkey;
        int numSge;
        final long[] addr;
        final int[] len;
        final int[] lkey;
        int inlineLen;
        /** Bytes the request moves: the SGEs' sum, or the inline length; set once at post time. */
        long length;
        final MemorySegment inline;

        SendWqe(int maxSge, MemorySegment inline) {
            addr = new long[maxSge];
            len = new int[maxSge];
            lkey = new int[maxSge];
            this.inline = inline;
        }

    }

    final HcaDevice dev;
    final int qpn;
    final int pdn;
    final IbvQpType type;
    final HwCq scq;
    final HwCq rcq;
    final HwSrq srq;
    private final boolean sqSigAll;
    private final int maxSendSge;
    private final int maxInline;
    private final RecvQueue rq;
    private final SendWqe[] sq;
    /** Written only by the drain loop (the wip holder). */
    private volatile long sqHead;
    private volatile long sqTail;
    /**
     * Requests up to here were discarded by a reset or destroy: the drain loop skips them. The
     * single-writer rule of {@link #sqHead} holds because reset only raises this mark.
     */
    private volatile long discardTo;
    private final ReentrantLock postLock = new ReentrantLock();
    private final AtomicInteger wip = new AtomicInteger();
    private volatile boolean stalled;
    private int rnrLeft = -1;
    private int retryLeft = -1;
    private final Runnable resume = () -> {
        stalled = false;
        doorbell();
    };

    private final IbvQpAttr attr = new IbvQpAttr();
    volatile IbvQpState state = IbvQpState.RESET;
    private static final java.lang.invoke.VarHandle STATE;

    static {
        try {
            STATE = java.lang.invoke.MethodHandles.lookup().findVarHandle(HwQp.class, "state", IbvQpState.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
    /** Its driver reset the device: the QP is gone for its user (EIO). */
    volatile boolean dead;
    // data-path copies of the attributes, written by modify
    private volatile int dlid;
    private volatile int destQpn;
    private volatile int portNum = 1;
    private volatile int accessFlags;
    private volatile int qkey;
    private volatile int mtu = 4096;
    private volatile int minRnrTimer;
    private volatile int timeout;
    private volatile int retryCnt;
    private volatile int rnrRetry;
    private int sqPsn;
    private int ePsn;

    // scratch of the executing requester (owned by the wip holder)
    private final Segs local;
    private final Segs remote;
    private final Segs grhSrc = new Segs(1);
    private final MemorySegment scratch;
    private final RecvQueue.Wqe recvCopy = new RecvQueue.Wqe(HcaDevice.MAX_SGE);

    final Counters stats = new Counters();

    /** Counters a tool or test can read. */
    public static final class Counters {
        public final java.util.concurrent.atomic.AtomicLong completed = new java.util.concurrent.atomic.AtomicLong();
        public final java.util.concurrent.atomic.AtomicLong errors = new java.util.concurrent.atomic.AtomicLong();
        public final java.util.concurrent.atomic.AtomicLong flushed = new java.util.concurrent.atomic.AtomicLong();
    }

    HwQp(HcaDevice dev, int qpn, int pdn, IbvQpInitAttr a, HwCq scq, HwCq rcq, HwSrq srq) {
        this.dev = dev;
        this.qpn = qpn;
        this.pdn = pdn;
        this.type = a.qpType;
        this.scq = scq;
        this.rcq = rcq;
        this.srq = srq;
        this.sqSigAll = a.sqSigAll;
        this.maxSendSge = a.maxSendSge;
        this.maxInline = a.maxInlineData;
        this.rq = srq == null ? new RecvQueue(a.maxRecvWr, a.maxRecvSge) : null;
        Arena arena = Arena.ofAuto();
        this.sq = new SendWqe[a.maxSendWr];
        for (int i = 0; i < sq.length; i++) {
            sq[i] = new SendWqe(a.maxSendSge, maxInline > 0 ? arena.allocate(maxInline) : MemorySegment.NULL);
        }
        this.scratch = arena.allocate(64, 8);
        int segs = Math.max(a.maxSendSge, HcaDevice.MAX_SGE);
        this.local = new Segs(segs);
        this.remote = new Segs(segs);
        scq.users.incrementAndGet();
        rcq.users.incrementAndGet();
        if (srq != null) {
            srq.users.incrementAndGet();
        }
    }

    /** The process whose memory inline sends read at post time (set by the provider). */
    private AddressSpace owner;

    public HwQp bindProcess(AddressSpace as) {
        this.owner = as;
        return this;
    }

    @Override
    public int qpNum() {
        return qpn;
    }

    @Override
    public IbvQpType qpType() {
        return type;
    }

    @Override
    public IbvQpState state() {
        return state;
    }

    public int pdn() {
        return pdn;
    }

    private void alive() {
        dev.alive();
        if (dead) {
            throw new KernelException(Errno.EIO, String.format("QP 0x%x: its device %s was removed by its driver", qpn, dev.name));
        }
    }

    // ------------------------------------------------------------------ modify

    @Override
    public synchronized void modify(IbvQpAttr a, int mask) {
        alive();
        IbvQpState cur = state;
        IbvQpState next = (mask & IbvQpAttr.STATE) != 0 ? a.qpState : cur;
        if ((mask & IbvQpAttr.STATE) != 0) {
            if (!cur.canMoveTo(next)) {
                throw new KernelException(Errno.EINVAL, String.format("QP 0x%x: cannot move from %s to %s", qpn, cur, next));
            }
            int need = IbvQpState.requiredMask(cur, next, type);
            if ((mask & need) != need) {
                throw new KernelException(Errno.EINVAL, String.format("QP 0x%x: %s -> %s needs attribute mask 0x%x, missing 0x%x",
                        qpn, cur, next, need, need & ~mask));
            }
        }
        // validate everything before changing anything
        if ((mask & IbvQpAttr.PORT) != 0) {
            dev.port(a.portNum);
        }
        if ((mask & IbvQpAttr.PATH_MTU) != 0) {
            try {
                IbvQpAttr.mtuBytes(a.pathMtu);
            } catch (IllegalArgumentException e) {
                throw new KernelException(Errno.EINVAL, "QP 0x" + Integer.toHexString(qpn) + ": " + e.getMessage());
            }
        }
        checkRange(mask, IbvQpAttr.RETRY_CNT, a.retryCnt, 7, "retry_cnt");
        checkRange(mask, IbvQpAttr.RNR_RETRY, a.rnrRetry, 7, "rnr_retry");
        checkRange(mask, IbvQpAttr.MIN_RNR_TIMER, a.minRnrTimer, 31, "min_rnr_timer");
        checkRange(mask, IbvQpAttr.TIMEOUT, a.timeout, 31, "timeout");
        if ((mask & IbvQpAttr.PORT) != 0) {
            attr.portNum = a.portNum;
        }
        if ((mask & IbvQpAttr.PATH_MTU) != 0) {
            attr.pathMtu = a.pathMtu;
        }
        if ((mask & IbvQpAttr.ACCESS_FLAGS) != 0) {
            attr.qpAccessFlags = a.qpAccessFlags;
        }
        if ((mask & IbvQpAttr.QKEY) != 0) {
            attr.qkey = a.qkey;
        }
        if ((mask & IbvQpAttr.AV) != 0) {
            attr.dlid = a.dlid;
        }
        if ((mask & IbvQpAttr.DEST_QPN) != 0) {
            attr.destQpNum = a.destQpNum;
        }
        if ((mask & IbvQpAttr.RQ_PSN) != 0) {
            attr.rqPsn = a.rqPsn & 0xFFFFFF;
            ePsn = attr.rqPsn;
        }
        if ((mask & IbvQpAttr.SQ_PSN) != 0) {
            attr.sqPsn = a.sqPsn & 0xFFFFFF;
            sqPsn = attr.sqPsn;
        }
        if ((mask & IbvQpAttr.RETRY_CNT) != 0) {
            attr.retryCnt = a.retryCnt;
        }
        if ((mask & IbvQpAttr.RNR_RETRY) != 0) {
            attr.rnrRetry = a.rnrRetry;
        }
        if ((mask & IbvQpAttr.MIN_RNR_TIMER) != 0) {
            attr.minRnrTimer = a.minRnrTimer;
        }
        if ((mask & IbvQpAttr.TIMEOUT) != 0) {
            attr.timeout = a.timeout;
        }
        if ((mask & IbvQpAttr.MAX_QP_RD_ATOMIC) != 0) {
            attr.maxRdAtomic = a.maxRdAtomic;
        }
        if ((mask & IbvQpAttr.MAX_DEST_RD_ATOMIC) != 0) {
            attr.maxDestRdAtomic = a.maxDestRdAtomic;
        }
        if ((mask & IbvQpAttr.PKEY_INDEX) != 0) {
            attr.pkeyIndex = a.pkeyIndex;
        }
        portNum = attr.portNum;
        mtu = IbvQpAttr.mtuBytes(attr.pathMtu);
        accessFlags = attr.qpAccessFlags;
        qkey = attr.qkey;
        dlid = attr.dlid;
        destQpn = attr.destQpNum;
        minRnrTimer = attr.minRnrTimer;
        timeout = attr.timeout;
        retryCnt = attr.retryCnt;
        rnrRetry = attr.rnrRetry;
        if (next != cur) {
            attr.qpState = next;
            switch (next) {
                case RESET -> reset();
                case ERR -> toError();
                default -> {
                    // a concurrent move to ERR (by the transport, outside this monitor) wins
                    if (!STATE.compareAndSet(this, cur, next)) {
                        throw new KernelException(Errno.EINVAL, String.format("QP 0x%x: moved to %s meanwhile", qpn, state));
                    }
                    if (next == IbvQpState.RTS) {
                        doorbell();
                    }
                }
            }
        }
    }

    private void checkRange(int mask, int bit, int v, int max, String what) {
        if ((mask & bit) != 0 && (v < 0 || v > max)) {
            throw new KernelException(Errno.EINVAL, String.format("QP 0x%x: %s %d is not 0..%d", qpn, what, v, max));
        }
    }

    /** To RESET: both queues emptied without completions (as the hardware does). */
    private void reset() {
        state = IbvQpState.RESET;
        postLock.lock();
        try {
            discardTo = sqTail;
        } finally {
            postLock.unlock();
        }
        doorbell(); // the drain loop applies the discard
        if (rq != null) {
            rq.lock.lock();
            try {
                rq.head = 0;
                rq.count = 0;
            } finally {
                rq.lock.unlock();
            }
        }
    }

    /** To ERR: outstanding receive requests flush now, send requests as the queue drains. */
    void toError() {
        state = IbvQpState.ERR;
        attr.qpState = IbvQpState.ERR;
        if (rq != null) {
            rq.lock.lock();
            try {
                while (rq.count > 0) {
                    RecvQueue.Wqe w = rq.peekLocked();
                    rcq.push(w.wrId, IbvWcStatus.WR_FLUSH_ERR, IbvWcOpcode.RECV, 0, 0, 0, qpn, 0, 0, false);
                    stats.flushed.incrementAndGet();
                    rq.consumeLocked();
                }
            } finally {
                rq.lock.unlock();
            }
        }
        stalled = false;
        doorbell();
    }

    @Override
    public synchronized IbvQpAttr query() {
        IbvQpAttr a = attr.copy();
        a.qpState = state;
        return a;
    }

    // ------------------------------------------------------------------ post

    @Override
    public void postSend(IbvSendWr wr) {
        alive();
        int queued = 0;
        postLock.lock();
        try {
            for (IbvSendWr w = wr; w != null; w = w.next) {
                IbvQpState st = state;
                if (w.opcode == null) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has no opcode", qpn, w.wrId), w);
                }
                if (st == IbvQpState.RESET || st == IbvQpState.INIT || st == IbvQpState.RTR) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x is in %s: ibv_post_send needs RTS", qpn, st), w);
                }
                if (w.numSge < 0 || w.numSge > maxSendSge || w.numSge > w.sgList.length) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has %d SGEs, max_send_sge is %d",
                            qpn, w.wrId, w.numSge, maxSendSge), w);
                }
                if (type == IbvQpType.UD && w.opcode != IbvWrOpcode.SEND && w.opcode != IbvWrOpcode.SEND_WITH_IMM) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: %s is not valid on a UD QP", qpn, w.opcode), w);
                }
                if (type == IbvQpType.UD && w.ah == null) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: a UD send needs an address handle", qpn), w);
                }
                boolean inl = (w.sendFlags & IbvSendWr.SEND_INLINE) != 0;
                long total = w.totalLength();
                if (inl && (total > maxInline || w.opcode == IbvWrOpcode.RDMA_READ || w.opcode.isAtomic())) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: inline %s of %d bytes (max_inline_data %d)",
                            qpn, w.opcode, total, maxInline), w);
                }
                if (sqTail - Math.max(sqHead, discardTo) == sq.length) {
                    throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: send queue full (%d requests)", qpn, sq.length), w);
                }
                SendWqe q = sq[(int) (sqTail % sq.length)];
                q.wrId = w.wrId;
                q.opcode = w.opcode;
                q.flags = w.sendFlags;
                q.imm = w.immData;
                q.remoteAddr = w.remoteAddr;
                q.rkey = w.rkey;
                q.compareAdd = w.compareAdd;
                q.swap = w.swap;
                q.dlid = w.ah != null ? w.ah.dlid() : 0;
                q.remoteQpn = w.remoteQpn;
                q.remoteQkey = w.remoteQkey;
                q.numSge = w.numSge;
                for (int i = 0; i < w.numSge; i++) {
                    q.addr[i] = w.sgList[i].addr;
                    q.len[i] = w.sgList[i].length;
                    q.lkey[i] = w.sgList[i].lkey;
                }
                if (inl) {
                    // the CPU copies the data into the WQE now; the buffer may be reused at once
                    long off = 0;
                    for (int i = 0; i < w.numSge; i++) {
                        try {
                            owner.copyOut(w.sgList[i].addr, q.inline, off, w.sgList[i].length);
                        } catch (RuntimeException e) {
                            throw new PostException(Errno.EFAULT, String.format("QP 0x%x: inline data at 0x%x: %s", qpn, w.sgList[i].addr,
                                    e.getMessage()), w);
                        }
                        off += w.sgList[i].length;
                    }
                    q.inlineLen = (int) off;
                }
                q.length = total;
                sqTail = sqTail + 1;
                queued++;
            }
        } finally {
            postLock.unlock();
            if (queued > 0) {
                doorbell(); // the requests before a refused one still go, as on real hardware
            }
        }
    }

    @Override
    public void postRecv(IbvRecvWr wr) {
        alive();
        if (srq != null) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x uses an SRQ: post to the SRQ", qpn), wr);
        }
        if (state == IbvQpState.RESET) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x is in RESET: ibv_post_recv needs INIT or later", qpn), wr);
        }
        rq.lock.lock();
        try {
            rq.postLocked(wr, dev.name, qpn);
            if (state == IbvQpState.ERR) {
                while (rq.count > 0) {
                    rcq.push(rq.peekLocked().wrId, IbvWcStatus.WR_FLUSH_ERR, IbvWcOpcode.RECV, 0, 0, 0, qpn, 0, 0, false);
                    rq.consumeLocked();
                }
            }
        } finally {
            rq.lock.unlock();
        }
    }

    // ------------------------------------------------------------------ the requester

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
                System.getLogger("org.peerdirect.hca").log(System.Logger.Level.ERROR, this + ": send queue drain failed", e);
            }
            missed = wip.addAndGet(-missed);
            if (missed == 0) {
                return;
            }
        }
    }

    private void processSq() {
        for (;;) {
            long h = sqHead;
            long d = discardTo;
            if (h < d) {
                // a reset or destroy discarded these, also a request stalled for a retry
                sqHead = d;
                rnrLeft = -1;
                stalled = false;
                h = d;
            }
            if (stalled) {
                return;
            }
            if (h == sqTail) {
                return;
            }
            SendWqe w = sq[(int) (h % sq.length)];
            IbvQpState st = state;
            if (st == IbvQpState.ERR) {
                rnrLeft = -1;
                complete(w, IbvWcStatus.WR_FLUSH_ERR, 0);
                stats.flushed.incrementAndGet();
                sqHead = h + 1;
                continue;
            }
            if (st != IbvQpState.RTS && st != IbvQpState.SQD) {
                return;
            }
            if (rnrLeft < 0) {
                rnrLeft = rnrRetry;
                retryLeft = retryCnt;
            }
            IbvWcStatus s;
            try {
                s = type == IbvQpType.RC ? executeRc(w) : executeUd(w);
            } catch (RuntimeException e) {
                // an engine bug must not wedge the queue: the request fails, the QP goes to ERR
                System.getLogger("org.peerdirect.hca").log(System.Logger.Level.ERROR, this + ": request " + w.wrId + " failed", e);
                s = IbvWcStatus.LOC_QP_OP_ERR;
            }
            if (s == RNR) {
                dev.rnrNaks.incrementAndGet();
                if (rnrRetry != 7 && rnrLeft-- == 0) {
                    fail(w, h, IbvWcStatus.RNR_RETRY_EXC_ERR);
                    continue;
                }
                stalled = true;
                schedule(IbvQpAttr.rnrTimerNanos(rnrTimerOfPeer(w)));
                return;
            }
            if (s == LOST) {
                dev.retries.incrementAndGet();
                if (retryLeft-- == 0) {
                    fail(w, h, IbvWcStatus.RETRY_EXC_ERR);
                    continue;
                }
                stalled = true;
                schedule(IbvQpAttr.ackTimeoutNanos(timeout == 0 ? 14 : timeout));
                return;
            }
            rnrLeft = -1;
            if (s != IbvWcStatus.SUCCESS) {
                fail(w, h, s);
                continue;
            }
            stats.completed.incrementAndGet();
            if ((w.flags & IbvSendWr.SEND_SIGNALED) != 0 || sqSigAll) {
                if (!complete(w, IbvWcStatus.SUCCESS, (int) w.length)) {
                    sqHead = h + 1;
                    toError();
                    continue;
                }
            }
            sqHead = h + 1;
        }
    }

    private void fail(SendWqe w, long h, IbvWcStatus s) {
        rnrLeft = -1;
        stats.errors.incrementAndGet();
        complete(w, s, 0);
        sqHead = h + 1;
        toError();
    }

    private int rnrTimerOfPeer(SendWqe w) {
        HwQp r = dev.fabric.resolve(dlid, destQpn);
        return r == null ? 12 : r.minRnrTimer;
    }

    private void schedule(long nanos) {
        if (dev.removed) {
            stalled = false;
            return;
        }
        try {
            dev.timer.schedule(resume, Math.min(nanos, TimeUnit.SECONDS.toNanos(10)), TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            stalled = false; // the device is going away; the next doorbell flushes
        }
    }

    private boolean complete(SendWqe w, IbvWcStatus s, int byteLen) {
        return scq.push(w.wrId, s, w.opcode.wcOpcode(), byteLen, 0, 0, qpn, 0, 0, false);
    }

    /** Resolves the local SGEs into {@link #local}; returns an error status or null. */
    private IbvWcStatus gatherLocal(SendWqe w, boolean needWrite) {
        local.reset(dev);
        if ((w.flags & IbvSendWr.SEND_INLINE) != 0) {
            local.inline(w.inline, 0, w.inlineLen);
            return null;
        }
        for (int i = 0; i < w.numSge; i++) {
            long l = w.len[i] & 0xFFFF_FFFFL;
            if (l == 0) {
                continue;
            }
            Mpt m = dev.mpt(w.lkey[i]);
            if (m == null || m.state != Mpt.State.VALID || m.pdn != pdn || !m.contains(w.addr[i], l)
                    || needWrite && (m.access & IbAccess.LOCAL_WRITE) == 0) {
                return IbvWcStatus.LOC_PROT_ERR;
            }
            local.add(m, w.addr[i], l);
        }
        return null;
    }

    private IbvWcStatus executeRc(SendWqe w) {
        long len = w.length;
        if (len > 0x8000_0000L) {
            return IbvWcStatus.LOC_LEN_ERR;
        }
        boolean read = w.opcode == IbvWrOpcode.RDMA_READ || w.opcode.isAtomic();
        IbvWcStatus s = gatherLocal(w, read);
        if (s != null) {
            return s;
        }
        if (w.opcode.isAtomic() && (local.n != 1 || len != 8)) {
            return IbvWcStatus.LOC_LEN_ERR;
        }
        HwQp r = dev.fabric.resolve(dlid, destQpn);
        HcaPort me = dev.ports[portNum - 1];
        if (r == null || !me.active || r.type != IbvQpType.RC || r.destQpn != qpn || r.dlid != me.lid
                || (r.state != IbvQpState.RTR && r.state != IbvQpState.RTS && r.state != IbvQpState.SQD)) {
            return LOST;
        }
        int packets = w.opcode.isAtomic() ? 1 : (int) Math.max(1, (len + mtu - 1) / mtu);
        if (r.ePsn != sqPsn) {
            return LOST; // out-of-sequence NAK: the requester retransmits; misconfigured PSNs end in RETRY_EXC_ERR
        }
        s = r.respondRc(this, w, len);
        if (s == IbvWcStatus.REM_ACCESS_ERR || s == IbvWcStatus.REM_INV_REQ_ERR || s == IbvWcStatus.REM_OP_ERR) {
            // class A/C errors of the IB spec: the responder NAKs and its QP goes to the error
            // state too (as rxe's do_class_ac_error does)
            r.toError();
        }
        if (s != RNR) {
            sqPsn = (sqPsn + packets) & 0xFFFFFF;
            r.ePsn = (r.ePsn + packets) & 0xFFFFFF;
        }
        return s;
    }

    /** The responder of an RC request; runs in the requester's thread. */
    private IbvWcStatus respondRc(HwQp req, SendWqe w, long len) {
        Segs dst = req.remote.reset(dev);
        switch (w.opcode) {
            case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> {
                IbvWcStatus s = remoteRange(req.remote, w.rkey, w.remoteAddr, len, IbAccess.REMOTE_WRITE);
                if (s != null) {
                    return s;
                }
                if (w.opcode == IbvWrOpcode.RDMA_WRITE_WITH_IMM) {
                    RecvQueue.Wqe rw = takeRecv(req.recvCopy);
                    if (rw == null) {
                        return RNR;
                    }
                    s = move(req.local, dst, len, IbvWcStatus.LOC_PROT_ERR, IbvWcStatus.REM_ACCESS_ERR);
                    if (s != null) {
                        // the receive was consumed: it completes with the error (rxe's class C handling)
                        recvComplete(rw.wrId, s == IbvWcStatus.REM_ACCESS_ERR ? IbvWcStatus.REM_ACCESS_ERR : IbvWcStatus.WR_FLUSH_ERR,
                                IbvWcOpcode.RECV_RDMA_WITH_IMM, 0, 0, 0, req.qpn, 0, w);
                        return s;
                    }
                    recvComplete(rw.wrId, IbvWcStatus.SUCCESS, IbvWcOpcode.RECV_RDMA_WITH_IMM, (int) len, w.imm,
                            IbvWc.WC_WITH_IMM, req.qpn, req.dev.ports[req.portNum - 1].lid, w);
                    return IbvWcStatus.SUCCESS;
                }
                return orOk(move(req.local, dst, len, IbvWcStatus.LOC_PROT_ERR, IbvWcStatus.REM_ACCESS_ERR));
            }
            case SEND, SEND_WITH_IMM -> {
                RecvQueue.Wqe rw = takeRecv(req.recvCopy);
                if (rw == null) {
                    return RNR;
                }
                return deliver(req, w, rw, len, false);
            }
            case RDMA_READ -> {
                IbvWcStatus s = remoteRange(req.remote, w.rkey, w.remoteAddr, len, IbAccess.REMOTE_READ);
                if (s != null) {
                    return s;
                }
                return orOk(move(dst, req.local, len, IbvWcStatus.REM_ACCESS_ERR, IbvWcStatus.LOC_PROT_ERR));
            }
            case ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD -> {
                return atomic(req, w);
            }
            default -> throw new AssertionError(w.opcode);
        }
    }

    /** Checks the QP's remote access and the rkey's entry; fills the cursor. Null when allowed. */
    private IbvWcStatus remoteRange(Segs dst, int rkey, long va, long len, int right) {
        if ((accessFlags & right) == 0) {
            return IbvWcStatus.REM_ACCESS_ERR;
        }
        if (len == 0) {
            return null;
        }
        Mpt m = dev.mpt(rkey);
        if (m == null || m.state != Mpt.State.VALID || m.pdn != pdn || (m.access & right) == 0 || !m.contains(va, len)) {
            return IbvWcStatus.REM_ACCESS_ERR;
        }
        dst.add(m, va, len);
        return null;
    }

    private IbvWcStatus atomic(HwQp req, SendWqe w) {
        if ((w.remoteAddr & 7) != 0) {
            return IbvWcStatus.REM_INV_REQ_ERR;
        }
        IbvWcStatus s = remoteRange(req.remote, w.rkey, w.remoteAddr, 8, IbAccess.REMOTE_ATOMIC);
        if (s != null) {
            return s;
        }
        Mpt m = req.remote.mpt[0];
        long old;
        long st = m.lock.readLock();
        try {
            if (m.state != Mpt.State.VALID) {
                return IbvWcStatus.REM_ACCESS_ERR;
            }
            long iova = m.iova(w.remoteAddr);
            old = w.opcode == IbvWrOpcode.ATOMIC_FETCH_AND_ADD ? dev.domain.fetchAdd(iova, w.compareAdd)
                    : dev.domain.compareAndSwap(iova, w.compareAdd, w.swap);
        } catch (IommuFault f) {
            return IbvWcStatus.REM_ACCESS_ERR;
        } finally {
            m.lock.unlockRead(st);
        }
        req.scratch.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, old);
        Segs src = req.grhSrc.reset(req.dev).inline(req.scratch, 0, 8);
        return orOk(move(src, req.local, 8, IbvWcStatus.LOC_PROT_ERR, IbvWcStatus.LOC_PROT_ERR));
    }

    private static IbvWcStatus orOk(IbvWcStatus moveResult) {
        return moveResult == null ? IbvWcStatus.SUCCESS : moveResult;
    }

    /** Takes the head receive WQE (own RQ or SRQ) into {@code copy}; null when none (RNR / UD drop). */
    private RecvQueue.Wqe takeRecv(RecvQueue.Wqe copy) {
        RecvQueue q = srq != null ? srq.rq : rq;
        q.lock.lock();
        try {
            RecvQueue.Wqe w = q.peekLocked();
            if (w == null) {
                return null;
            }
            copy.wrId = w.wrId;
            copy.numSge = w.numSge;
            for (int i = 0; i < w.numSge; i++) {
                copy.addr[i] = w.addr[i];
                copy.len[i] = w.len[i];
                copy.lkey[i] = w.lkey[i];
            }
            q.consumeLocked();
            return copy;
        } finally {
            q.lock.unlock();
        }
    }

    /**
     * Delivers a SEND into a receive WQE: checks its SGEs and length, moves the data (after a GRH
     * for UD), completes the receive. Returns the requester's status.
     */
    private IbvWcStatus deliver(HwQp req, SendWqe w, RecvQueue.Wqe rw, long len, boolean grh) {
        Segs dst = req.remote.reset(dev);
        int rpdn = srq != null ? srq.pdn : pdn;
        for (int i = 0; i < rw.numSge; i++) {
            long l = rw.len[i] & 0xFFFF_FFFFL;
            if (l == 0) {
                continue;
            }
            Mpt m = dev.mpt(rw.lkey[i]);
            if (m == null || m.state != Mpt.State.VALID || m.pdn != rpdn || (m.access & IbAccess.LOCAL_WRITE) == 0
                    || !m.contains(rw.addr[i], l)) {
                recvComplete(rw.wrId, IbvWcStatus.LOC_PROT_ERR, IbvWcOpcode.RECV, 0, 0, 0, req.qpn, 0, w);
                if (type == IbvQpType.RC) {
                    toError();
                }
                return IbvWcStatus.REM_OP_ERR;
            }
            dst.add(m, rw.addr[i], l);
        }
        long need = len + (grh ? 40 : 0);
        if (dst.total() < need) {
            recvComplete(rw.wrId, IbvWcStatus.LOC_LEN_ERR, IbvWcOpcode.RECV, 0, 0, 0, req.qpn, 0, w);
            if (type == IbvQpType.RC) {
                toError();
            }
            return IbvWcStatus.REM_INV_REQ_ERR;
        }
        int slid = req.dev.ports[req.portNum - 1].lid;
        if (grh) {
            writeGrh(req, slid, len);
            IbvWcStatus s = move(req.grhSrc.reset(req.dev).inline(req.scratch, 0, 40), dst, 40, IbvWcStatus.LOC_PROT_ERR,
                    IbvWcStatus.REM_OP_ERR);
            if (s != null) {
                recvComplete(rw.wrId, IbvWcStatus.LOC_PROT_ERR, IbvWcOpcode.RECV, 0, 0, 0, req.qpn, 0, w);
                return s;
            }
        }
        IbvWcStatus s = move(req.local, dst, len, IbvWcStatus.LOC_PROT_ERR, IbvWcStatus.REM_OP_ERR);
        if (s != null) {
            recvComplete(rw.wrId, IbvWcStatus.LOC_PROT_ERR, IbvWcOpcode.RECV, 0, 0, 0, req.qpn, 0, w);
            return s;
        }
        boolean imm = w.opcode.hasImm();
        recvComplete(rw.wrId, IbvWcStatus.SUCCESS, IbvWcOpcode.RECV, (int) need, imm ? w.imm : 0,
                (imm ? IbvWc.WC_WITH_IMM : 0) | (grh ? IbvWc.WC_GRH : 0), req.qpn, slid, w);
        return IbvWcStatus.SUCCESS;
    }

    private void recvComplete(long wrId, IbvWcStatus s, IbvWcOpcode op, int byteLen, int imm, int flags, int srcQp, int slid,
            SendWqe w) {
        boolean solicited = (w.flags & IbvSendWr.SEND_SOLICITED) != 0;
        if (!rcq.push(wrId, s, op, byteLen, imm, flags, qpn, srcQp, slid, solicited)) {
            toError();
        }
    }

    /** A GRH (IPv6-like, 40 bytes) into the requester's scratch: version 6, payload length, next header 0x1B, GIDs. */
    private void writeGrh(HwQp req, int slid, long len) {
        MemorySegment g = req.scratch;
        ValueLayout.OfInt be = ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN);
        g.set(be, 0, 0x6000_0000);
        g.set(be, 4, (int) ((len & 0xFFFF) << 16) | 0x1B << 8 | 64);
        g.set(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 8, 0xfe80_0000_0000_0000L);
        g.set(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 16, slid);
        g.set(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 24, 0xfe80_0000_0000_0000L);
        g.set(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 32, dev.ports[portNum - 1].lid);
    }

    private IbvWcStatus executeUd(SendWqe w) {
        long len = w.length;
        if (len > mtu) {
            return IbvWcStatus.LOC_LEN_ERR;
        }
        IbvWcStatus s = gatherLocal(w, false);
        if (s != null) {
            return s;
        }
        HwQp r = dev.fabric.resolve(w.dlid, w.remoteQpn);
        if (r == null || r.type != IbvQpType.UD || !dev.ports[portNum - 1].active
                || (r.state != IbvQpState.RTR && r.state != IbvQpState.RTS && r.state != IbvQpState.SQD)) {
            return IbvWcStatus.SUCCESS; // unreliable: the datagram is lost, the send still completes
        }
        int useQkey = w.remoteQkey < 0 ? qkey : w.remoteQkey;
        if (useQkey != r.qkey) {
            return IbvWcStatus.SUCCESS; // Q_Key mismatch: silently dropped at the receiver
        }
        RecvQueue.Wqe rw = r.takeRecv(recvCopy);
        if (rw == null) {
            return IbvWcStatus.SUCCESS; // no receive posted: dropped
        }
        r.deliver(this, w, rw, len, true);
        return IbvWcStatus.SUCCESS;
    }

    /**
     * Moves {@code len} bytes from {@code src} to {@code dst}, chunk by chunk within IOVA-contiguous
     * blocks, each chunk under the read locks of both entries (key order). Returns null, or the
     * status of the side whose key was revoked or whose DMA faulted.
     */
    private static IbvWcStatus move(Segs src, Segs dst, long len, IbvWcStatus srcErr, IbvWcStatus dstErr) {
        while (len > 0) {
            long a = src.left();
            long b = dst.left();
            if (a == 0 || b == 0) {
                return b == 0 ? dstErr : srcErr;
            }
            Mpt sm = src.inline != null ? null : src.mpt[src.cur];
            Mpt dm = dst.mpt[dst.cur];
            long sva = src.va[src.cur] + src.done;
            long dva = dst.va[dst.cur] + dst.done;
            long n = Math.min(len, Math.min(a, b));
            if (sm != null) {
                n = Math.min(n, sm.contiguous(sva));
            }
            n = Math.min(n, dm.contiguous(dva));
            Mpt first = sm == null || dm.serial < sm.serial ? dm : sm;
            Mpt second = first == dm ? sm : dm;
            if (second == first) {
                second = null;
            }
            long s1 = first.lock.readLock();
            long s2 = second == null ? 0 : second.lock.readLock();
            try {
                if (sm != null && sm.state != Mpt.State.VALID) {
                    return srcErr;
                }
                if (dm.state != Mpt.State.VALID) {
                    return dstErr;
                }
                if (sm == null) {
                    dst.dev.domain.write(dm.iova(dva), src.inline, src.inlineOff + src.done, n);
                } else {
                    src.dev.domain.copyTo(sm.iova(sva), dst.dev.domain, dm.iova(dva), n);
                }
            } catch (IommuFault f) {
                boolean srcSide = src.dev.domain != dst.dev.domain ? f.domain().equals(src.dev.domain.name())
                        : sm != null && f.iova() >= sm.iova(sva) && f.iova() < sm.iova(sva) + n;
                return srcSide ? srcErr : dstErr;
            } finally {
                if (second != null) {
                    second.lock.unlockRead(s2);
                }
                first.lock.unlockRead(s1);
            }
            src.advance(n);
            dst.advance(n);
            len -= n;
        }
        return null;
    }

    // ------------------------------------------------------------------ destroy

    private final java.util.concurrent.atomic.AtomicBoolean destroyedOnce = new java.util.concurrent.atomic.AtomicBoolean();

    @Override
    public void destroy() {
        if (!destroyedOnce.compareAndSet(false, true)) {
            return;
        }
        synchronized (this) {
            state = IbvQpState.ERR;
        }
        // completions of a destroyed QP are not reported: its requests are discarded
        postLock.lock();
        try {
            discardTo = sqTail;
        } finally {
            postLock.unlock();
        }
        doorbell();
        dev.destroyed(this);
        scq.users.decrementAndGet();
        rcq.users.decrementAndGet();
        if (srq != null) {
            srq.users.decrementAndGet();
        }
    }

    /** Send requests posted and not yet completed. */
    public long outstandingSends() {
        return sqTail - Math.max(sqHead, discardTo);
    }

    public Counters stats() {
        return stats;
    }

    @Override
    public String toString() {
        return String.format("%s QP 0x%x (%s, %s)", dev.name, qpn, type, state);
    }
}
