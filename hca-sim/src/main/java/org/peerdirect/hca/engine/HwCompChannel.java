package org.peerdirect.hca.engine;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/** A completion channel: CQ events queued for {@link #getCqEvent}. Its lock is a leaf. */
public final class HwCompChannel implements IbvCompChannel {

    private final HcaDevice dev;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition ready = lock.newCondition();
    private final ArrayDeque<IbvCq> events = new ArrayDeque<>();
    private long acked;
    /** Its device was removed or reset: waiting is over (guarded by lock). */
    private boolean dead;
    private long delivered;

    HwCompChannel(HcaDevice dev) {
        this.dev = dev;
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
                if (dev.removed || dead) {
                    throw new KernelException(Errno.EIO, "device " + dev.name + " was removed");
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
            acked += n;
            if (acked > delivered) {
                acked -= n;
                throw new KernelException(Errno.EINVAL, "ack of " + n + " events, only " + (delivered - acked) + " unacked");
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void destroy() {
        lock.lock();
        try {
            if (delivered != acked) {
                throw new KernelException(Errno.EBUSY, (delivered - acked) + " CQ events are not acknowledged (ibv_ack_cq_events)");
            }
        } finally {
            lock.unlock();
        }
    }

}
