package org.peerdirect.ib.core.uverbs;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * A completion channel ({@code ib_uverbs_completion_event_file}): CQ events queued for
 * {@link #getCqEvent}. Its lock is a leaf.
 */
final class UCompChannel implements IbvCompChannel {

    final UContext ctx;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition ready = lock.newCondition();
    private final ArrayDeque<IbvCq> events = new ArrayDeque<>();
    private long acked;
    private long delivered;
    /** The device went or the context closed: waiting is over (guarded by lock). */
    private boolean dead;
    private boolean destroyed;

    UCompChannel(UContext ctx) {
        this.ctx = ctx;
    }

    void signal(IbvCq cq) {
        lock.lock();
        try {
            events.add(cq);
            ready.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** The context's close: the channel is destroyed with it (unacknowledged events or not); waiters read EIO. */
    void destroyedByClose() {
        lock.lock();
        try {
            dead = true;
            destroyed = true;
            ready.signalAll();
        } finally {
            lock.unlock();
        }
    }

    void wakeAll() {
        lock.lock();
        try {
            dead = true;
            ready.signalAll();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public IbvCq getCqEvent(Duration timeout) throws InterruptedException {
        long left = timeout.toNanos();
        lock.lock();
        try {
            while (events.isEmpty()) {
                if (ctx.dev.removed) {
                    throw ctx.dev.removedError();
                }
                if (dead || destroyed) {
                    throw new KernelException(Errno.EIO, "ibv_get_cq_event: the channel's context was closed");
                }
                if (left <= 0) {
                    return null;
                }
                left = ready.awaitNanos(left);
            }
            delivered++;
            return events.poll();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void ackCqEvents(IbvCq cq, int n) {
        lock.lock();
        try {
            if (n < 0 || acked + n > delivered) {
                throw new KernelException(Errno.EINVAL, "ibv_ack_cq_events: ack of " + n + " events, only " + (delivered - acked) + " unacked");
            }
            acked += n;
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code ibv_destroy_comp_channel}: EBUSY while CQ events are not acknowledged; idempotent,
     * and nothing once the context's close destroyed the channel ({@link #destroyedByClose}).
     */
    @Override
    public void destroy() {
        lock.lock();
        try {
            if (destroyed) {
                return;
            }
            if (delivered != acked) {
                throw new KernelException(Errno.EBUSY, "ibv_destroy_comp_channel: " + (delivered - acked)
                        + " CQ events are not acknowledged (ibv_ack_cq_events)");
            }
            destroyed = true;
            ready.signalAll();
        } finally {
            lock.unlock();
        }
        ctx.channels.remove(this);
    }
}
