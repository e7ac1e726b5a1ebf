package org.peerdirect.kernel.mm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.kernel.jfr.KernelEvents;

/**
 * {@code struct mmu_notifier_subscriptions} of one address space: the interval notifiers and the
 * global invalidate sequence. The sequence is even while no invalidation runs and odd while one
 * or more do; it advances once when the first starts and once when the last ends.
 *
 * <p>Lock: {@code lock} guards {@code invalidateSeq} and {@code running} (the invalidations
 * in progress; one or more while the sequence is odd); callbacks run without it. Every
 * {@link #start} is paired with one {@link #end} whether or not a callback threw (the caller
 * ends in a finally), so a reader never waits for an invalidation nobody runs. The waits of
 * {@link #readBegin} and {@link #remove} are bounded by {@link #WAIT_NANOS}: a callback that
 * never returns becomes an ETIMEDOUT naming the invalidation, not a hang.
 */
final class MmuNotifierSubscriptions {

    /** How long a reader or a remover waits for running invalidations to end. */
    static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(30);

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition ended = lock.newCondition();
    private long invalidateSeq = 2;
    /** The invalidations in progress (their ranges are described only in the error of a wait that times out). */
    private final List<MmuNotifierRange> running = new ArrayList<>();
    /**
     * The notifiers by start address (the kernel's interval tree, {@code itree}): insert and
     * remove are logarithmic, so tens of thousands of ODP MRs come and go without copying a list
     * each time. A lookup of [s, e) scans the starts in (s - {@link #longest}, e): no notifier
     * starting earlier can reach s.
     */
    private final ConcurrentSkipListMap<Key, MmuIntervalNotifier> notifiers = new ConcurrentSkipListMap<>();
    /**
     * The length of the longest notifier inserted now (0 when none), written under {@code lock}.
     * An invalidation reads it after {@link #start} took and left the lock: an insert that held
     * the lock before is seen with its length; one that comes after saw this invalidation running
     * and made its readers wait for it (as {@code mmu_interval_notifier_insert}), so missing it is
     * allowed. A remove lowers it only after the notifier left {@link #notifiers}. {@link #lengths}
     * counts the notifiers by length, so removing the one long notifier (a 1 TiB ODP MR) shortens
     * later scans again.
     */
    private volatile long longest;
    /** Guarded by lock: notifiers by length → how many. */
    private final java.util.TreeMap<Long, Integer> lengths = new java.util.TreeMap<>();
    /** Guarded by lock: the last notifier id given. */
    private long ids;

    /** A notifier's place in {@link #notifiers}: its start, then the order of insertion. */
    record Key(long start, long id) implements Comparable<Key> {
        @Override
        public int compareTo(Key o) {
            int c = Long.compare(start, o.start);
            return c != 0 ? c : Long.compare(id, o.id);
        }
    }

    /** The notifiers that may overlap [start, end): a superset, each to be checked. */
    private Iterable<MmuIntervalNotifier> candidates(long start, long end) {
        long from = start - longest; // may be negative: the keys' order is numeric, and starts are never negative
        return notifiers.subMap(new Key(from, Long.MIN_VALUE), true, new Key(end, Long.MIN_VALUE), false).values();
    }

    MmuIntervalNotifier insert(AddressSpace mm, long start, long end, MmuIntervalNotifierOps ops) {
        lock.lock();
        try {
            // as mmu_interval_notifier_insert: a reader that begins now waits for a running invalidation
            long seq = running.isEmpty() ? invalidateSeq - 1 : invalidateSeq;
            MmuIntervalNotifier n = new MmuIntervalNotifier(mm, start, end, ops, seq, new Key(start, ++ids));
            notifiers.put(n.key, n);
            lengths.merge(end - start, 1, Integer::sum);
            longest = lengths.lastKey();
            return n;
        } finally {
            lock.unlock();
        }
    }

    void remove(MmuIntervalNotifier n) {
        if (!notifiers.remove(n.key, n)) {
            throw new KernelException(KernelException.Errno.EINVAL, n + " is not inserted (removed twice?)");
        }
        lock.lock();
        try {
            lengths.merge(n.end() - n.start(), -1, (a, b) -> a + b == 0 ? null : a + b);
            longest = lengths.isEmpty() ? 0 : lengths.lastKey();
            n.removed = true;
            // a callback of n may be running: wait for the invalidation that runs it to end
            if (!running.isEmpty()) {
                awaitSeqChange(invalidateSeq, "removing " + n, WAIT_NANOS);
            }
        } finally {
            lock.unlock();
        }
    }

    long readBegin(MmuIntervalNotifier n) {
        return readBegin(n, WAIT_NANOS);
    }

    long readBegin(MmuIntervalNotifier n, long waitNanos) {
        lock.lock();
        try {
            // as mmu_interval_read_begin: the notifier's sequence is read under the lock
            long seq = n.invalidateSeq;
            if (seq == invalidateSeq && !running.isEmpty()) {
                awaitSeqChange(seq, "read_begin of " + n, waitNanos);
            }
            return seq;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits until the global sequence moves past {@code seq} (the running invalidations ended),
     * at most {@code waitNanos}. Caller holds {@code lock}.
     */
    private void awaitSeqChange(long seq, String who, long waitNanos) {
        assert lock.isHeldByCurrentThread();
        long left = waitNanos;
        while (invalidateSeq == seq) {
            if (left <= 0) {
                throw new KernelException(KernelException.Errno.ETIMEDOUT, String.format(
                        "%s: invalidation%s %s still running after %d ms (a notifier callback that never returns?)", who,
                        running.size() == 1 ? "" : "s", running.stream().map(MmuNotifierSubscriptions::describe).toList(),
                        TimeUnit.NANOSECONDS.toMillis(waitNanos)));
            }
            try {
                left = ended.awaitNanos(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new KernelException(KernelException.Errno.EINTR, who + ": interrupted waiting for " + running.stream().map(MmuNotifierSubscriptions::describe).toList());
            }
        }
    }

    /**
     * Starts an invalidation and calls every overlapping notifier; the caller must call
     * {@link #end(MmuNotifierRange)} for it in a finally, also when this throws. A callback that
     * throws does not keep the others from running (each must still stop its device); the first
     * failure is thrown after all ran, naming the notifier, the others suppressed in it.
     */
    void start(MmuNotifierRange range) {
        long cur;
        lock.lock();
        try {
            if (running.isEmpty()) {
                invalidateSeq++; // odd: the first invalidation starts
            }
            running.add(range);
            cur = invalidateSeq;
        } finally {
            lock.unlock();
        }
        KernelException failed = null;
        for (MmuIntervalNotifier n : candidates(range.start(), range.end())) {
            if (!n.removed && n.start() < range.end() && range.start() < n.end()) {
                KernelEvents.MmuNotifierInvalidate jfr = KernelEvents.MmuNotifierInvalidate.start();
                try {
                    n.ops().invalidate(n, range, cur);
                } catch (RuntimeException | AssertionError e) {
                    KernelException k = new KernelException(KernelException.Errno.EIO,
                            String.format("the %s callback of %s failed: %s", range.event(), n, e), e);
                    if (failed == null) {
                        failed = k;
                    } else {
                        failed.addSuppressed(k);
                    }
                } finally {
                    KernelEvents.MmuNotifierInvalidate.done(jfr, range, n, cur);
                }
            }
        }
        if (failed != null) {
            throw failed;
        }
    }

    void end(MmuNotifierRange range) {
        lock.lock();
        try {
            running.remove(range);
            if (running.isEmpty()) {
                invalidateSeq++; // even: the last one ended
                ended.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    private static String describe(MmuNotifierRange r) {
        return String.format("%s[0x%x-0x%x]", r.event(), r.start(), r.end());
    }

    boolean overlaps(long start, long end) {
        for (MmuIntervalNotifier n : candidates(start, end)) {
            if (n.start() < end && start < n.end()) {
                return true;
            }
        }
        return false;
    }

    List<MmuIntervalNotifier> all() {
        return new ArrayList<>(notifiers.values());
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
