package org.peerdirect.hca.engine;

import java.util.concurrent.locks.ReentrantLock;

/**
 * A ring of receive WQE slots (a QP's receive queue or an SRQ). The driver produces: it fills the
 * slot at its producer index (only while {@code producer - consumerIndex() < size()}) and writes
 * the new producer index to the doorbell record ({@link HwQp#rqDoorbell} / {@link HwSrq#doorbell}).
 * The hardware consumes.
 *
 * <p>Lock rules: {@link #consumerLock} serialises the hardware's consumers (responders of several
 * requesters, flush, reset); it is a leaf except for the CQ lock a flush takes. Producer and
 * consumer meet only through the volatile indices.
 */
public final class RecvQueue {

    private final RecvWqe[] ring;
    private final int mask;
    private final int maxSge;
    final ReentrantLock consumerLock = new ReentrantLock();
    /** Hardware consumer index; written under consumerLock with release, read by the driver with acquire. */
    private long head;
    /** The doorbell record: the driver's producer index (release by the driver, acquire here). */
    private long tail;
    private static final java.lang.invoke.VarHandle HEAD;
    private static final java.lang.invoke.VarHandle TAIL;

    static {
        try {
            java.lang.invoke.MethodHandles.Lookup l = java.lang.invoke.MethodHandles.lookup();
            HEAD = l.findVarHandle(RecvQueue.class, "head", long.class);
            TAIL = l.findVarHandle(RecvQueue.class, "tail", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The armed limit ({@link #arm}): 0 when not armed. Written under consumerLock. */
    private volatile int limit;
    private volatile Runnable limitReached;

    /** Set once by a memory-queue personality before the QP leaves RST; read under consumerLock. */
    private volatile RecvFetcher fetcher;

    RecvQueue(int maxWr, int maxSge) {
        this.maxSge = maxSge;
        ring = new RecvWqe[HcaDevice.roundUpPow2(Math.max(1, maxWr))];
        mask = ring.length - 1;
        for (int i = 0; i < ring.length; i++) {
            ring[i] = new RecvWqe(maxSge);
        }
    }

    /**
     * Makes this a queue in host memory: when it looks empty the hardware reads the driver's
     * doorbell record through {@code f} instead of waiting for {@link HwQp#rqDoorbell}.
     */
    public void fetcher(RecvFetcher f) {
        fetcher = f;
    }

    /** The queue is in host memory: its WQEs are known only by reading the doorbell record ({@link #fetcher}). */
    boolean inHostMemory() {
        return fetcher != null;
    }

    /** Under consumerLock: the tail, after asking the fetcher when the queue looks empty at {@code h}. */
    private long tailAt(long h) {
        assert consumerLock.isHeldByCurrentThread();
        long t = (long) TAIL.getAcquire(this);
        RecvFetcher f = fetcher;
        if (h == t && f != null) {
            long n = f.fetch(this, h, t);
            if (n > t) {
                TAIL.setRelease(this, n);
                t = n;
            }
        }
        return t;
    }

    /** Slots: the requested count rounded up to a power of two. */
    public int size() {
        return ring.length;
    }

    public int maxSge() {
        return maxSge;
    }

    /** The slot of WQE {@code index} (the driver fills it before ringing the doorbell past it). */
    public RecvWqe slot(long index) {
        return ring[(int) index & mask];
    }

    /** The hardware's consumer index: slots below it are free again. */
    public long consumerIndex() {
        return (long) HEAD.getAcquire(this);
    }

    void doorbell(long producerIndex) {
        TAIL.setRelease(this, producerIndex);
    }

    /**
     * Copies the head WQE into {@code copy} and returns its index still holding
     * {@link #consumerLock}, or returns -1 (lock released) when the queue is empty. The responder
     * places the data first and consumes the WQE after, with {@link #commitAndUnlock}; when the
     * placement met a page not present it {@link #unlock}s instead and the WQE stays at the head for
     * the retry, as the hardware keeps a receive WQE whose data it could not place. The caller must
     * not complete, flush or move a QP to ERR while holding the lock.
     */
    long peekAndLock(RecvWqe copy) {
        consumerLock.lock();
        long h = head;
        if (h == tailAt(h)) {
            consumerLock.unlock();
            return -1;
        }
        copy.copyFrom(slot(h));
        return h;
    }

    /** Consumes WQE {@code index}, the one {@link #peekAndLock} returned, and releases the lock. */
    void commitAndUnlock(long index) {
        assert consumerLock.isHeldByCurrentThread();
        assert index == head;
        HEAD.setRelease(this, index + 1);
        boolean fire = limit > 0 && belowLimit(index + 1);
        consumerLock.unlock();
        if (fire) {
            Runnable r = limitReached;
            if (r != null) {
                r.run();
            }
        }
    }

    /**
     * Under consumerLock: fewer WQEs than the armed limit remain after consuming up to {@code h}
     * (those in the ring and those the fetcher has not fetched yet); if so, disarms. As rxe's
     * {@code get_srq_wqe} and the PRM's lwm: checked when a WQE is consumed, not when armed.
     */
    private boolean belowLimit(long h) {
        assert consumerLock.isHeldByCurrentThread();
        RecvFetcher f = fetcher;
        long remaining = (long) TAIL.getAcquire(this) - h + (f == null ? 0 : f.notFetched(this));
        if (remaining < limit) {
            limit = 0;
            return true;
        }
        return false;
    }

    /**
     * {@code ARM_SRQ} / {@code ARM_RQ}: arms the limit event at {@code lwm} WQEs (0 disarms).
     * The caller checked the range; taken under consumerLock so no consumer disarms a stale limit.
     */
    void arm(int lwm) {
        consumerLock.lock();
        try {
            limit = lwm;
        } finally {
            consumerLock.unlock();
        }
    }

    /** The armed limit, 0 when not armed ({@code QUERY_SRQ}'s lwm). */
    int limit() {
        return limit;
    }

    /** What runs when the limit is reached (the owner's event), outside the lock. Set once. */
    void onLimit(Runnable r) {
        limitReached = r;
    }

    /** Leaves the head WQE where it is and releases the lock. */
    void unlock() {
        assert consumerLock.isHeldByCurrentThread();
        consumerLock.unlock();
    }

    /**
     * Completes every posted WQE with WR_FLUSH_ERR on {@code cq} while {@code inError} (the QP is
     * in ERR and not destroyed), which is checked under {@link #consumerLock}: a move to RESET sets
     * the state and then {@link #discard}s under the same lock, so a flush either ends before the
     * 2RST_QP returns or writes nothing after it. Checked before taking the lock, a flush could
     * run after the driver's {@code mlx4_cq_clean} and its reset of the doorbell record (which a
     * 16-bit record reads as 2^16 - n new WQEs: the CQ overran).
     */
    void flush(HwCq cq, int qpn, java.util.function.BooleanSupplier inError) {
        consumerLock.lock();
        try {
            if (!inError.getAsBoolean()) {
                return;
            }
            for (long h = head; h != tailAt(h); h++) {
                cq.push(qpn, false, h, Cqe.RECV_SEND, Outcome.WR_FLUSH_ERR, 0, 0, 0, 0, 0, false);
                HEAD.setRelease(this, h + 1);
            }
        } finally {
            consumerLock.unlock();
        }
    }

    /** Drops every posted WQE without completions (a QP moved to RESET). */
    void discard() {
        consumerLock.lock();
        try {
            HEAD.setRelease(this, (long) TAIL.getAcquire(this)); // WQEs not fetched yet are dropped with the personality's counters
        } finally {
            consumerLock.unlock();
        }
    }
}
