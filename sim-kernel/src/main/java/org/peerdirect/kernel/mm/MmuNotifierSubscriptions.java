package org.peerdirect.kernel.mm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * {@code struct mmu_notifier_subscriptions} of one address space: the interval notifiers and the
 * global invalidate sequence. The sequence is even while no invalidation runs and odd while one
 * or more do; it advances once when the first starts and once when the last ends.
 *
 * <p>Lock: {@code lock} guards {@code invalidateSeq} and {@code active}; callbacks run without it.
 */
final class MmuNotifierSubscriptions {

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition ended = lock.newCondition();
    private long invalidateSeq = 2;
    private int active;
    private final List<MmuIntervalNotifier> notifiers = new CopyOnWriteArrayList<>();

    MmuIntervalNotifier insert(AddressSpace mm, long start, long end, MmuIntervalNotifierOps ops) {
        lock.lock();
        try {
            // as mmu_interval_notifier_insert: a reader that begins now waits for a running invalidation
            long seq = active > 0 ? invalidateSeq : invalidateSeq - 1;
            MmuIntervalNotifier n = new MmuIntervalNotifier(mm, start, end, ops, seq);
            notifiers.add(n);
            return n;
        } finally {
            lock.unlock();
        }
    }

    void remove(MmuIntervalNotifier n) {
        if (!notifiers.remove(n)) {
            throw new KernelException(KernelException.Errno.EINVAL, n + " is not inserted (removed twice?)");
        }
        lock.lock();
        try {
            n.removed = true;
            // a callback of n may be running: wait for the invalidation that runs it to end
            if (active > 0) {
                long seq = invalidateSeq;
                while (invalidateSeq == seq) {
                    ended.awaitUninterruptibly();
                }
            }
        } finally {
            lock.unlock();
        }
    }

    long readBegin(MmuIntervalNotifier n) {
        long seq = n.invalidateSeq;
        lock.lock();
        try {
            while (seq == invalidateSeq && active > 0) {
                ended.awaitUninterruptibly();
            }
            return seq;
        } finally {
            lock.unlock();
        }
    }

    /** Starts an invalidation: calls every overlapping notifier; must be paired with {@link #end()}. */
    void start(MmuNotifierRange range) {
        long cur;
        lock.lock();
        try {
            if (active++ == 0) {
                invalidateSeq++;
            }
            cur = invalidateSeq;
        } finally {
            lock.unlock();
        }
        for (MmuIntervalNotifier n : notifiers) {
            if (!n.removed && n.start() < range.end() && range.start() < n.end()) {
                n.ops().invalidate(n, range, cur);
            }
        }
    }

    void end() {
        lock.lock();
        try {
            if (--active == 0) {
                invalidateSeq++;
                ended.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    boolean overlaps(long start, long end) {
        for (MmuIntervalNotifier n : notifiers) {
            if (n.start() < end && start < n.end()) {
                return true;
            }
        }
        return false;
    }

    List<MmuIntervalNotifier> all() {
        return new ArrayList<>(notifiers);
    }

    long seq() {
        lock.lock();
        try {
            return invalidateSeq;
        } finally {
            lock.unlock();
        }
    }
}
