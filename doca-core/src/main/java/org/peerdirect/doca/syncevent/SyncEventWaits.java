package org.peerdirect.doca.syncevent;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;

/**
 * The CPU waiters of one {@link DocaSyncEvent} ({@code doca_sync_event_wait_gt} and its forms):
 * they sleep on {@link #changed} while every update passes through the event (a CPU publisher:
 * each update calls {@link #wakeIfWaited}), and poll otherwise.
 *
 * <p>Lock rules: {@link #lock} guards nothing but the condition; {@link #waiters} counts the
 * threads inside {@link #await} so an updater takes the lock only when someone waits (the fast
 * path takes none). A waiter registers before its second look, so an update between a look and
 * the sleep is not lost.
 */
final class SyncEventWaits {

    /** A polling wait's spins before it paces itself, and its pace then. */
    private static final int SPINS = 1024;
    private static final long POLL_NANOS = TimeUnit.MICROSECONDS.toNanos(20);

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final AtomicInteger waiters = new AtomicInteger();
    /** Updates that went through the event ({@link #wakeIfWaited}, {@link #wakeAll}): how a wait tells a late look at a signalled pass from a lost wake-up. */
    private final AtomicLong signals = new AtomicLong();

    static boolean passed(long v, long threshold, long mask) {
        return Long.compareUnsigned(v & mask, threshold) > 0;
    }

    /**
     * Returns once {@code (value & mask) > threshold}, unsigned: a first look without a lock; then,
     * while {@code polls} is false, sleep on {@link #changed}; while it is true (another publisher,
     * or a counter updates reach by DMA or through the DPA's window, which signal nothing) poll, as
     * DOCA's wait does: spinning first, then, past {@link #SPINS}, a look every {@link #POLL_NANOS}
     * so a long wait leaves the machine's cores to the DPA's harts and the NIC that will move the
     * counter (a poll's pace, not a synchronisation). {@code timeoutNanos} &lt; 0: unbounded.
     * {@code value} throws when the event is stopped or destroyed meanwhile.
     */
    void await(String what, long threshold, long mask, long timeoutNanos, boolean yield, LongSupplier value, BooleanSupplier polls) {
        if (passed(value.getAsLong(), threshold, mask)) {
            return;
        }
        // Unbounded, or so far away that nanoTime() + timeout could wrap: no deadline.
        boolean bounded = timeoutNanos >= 0 && timeoutNanos <= Long.MAX_VALUE / 4;
        long deadline = bounded ? System.nanoTime() + timeoutNanos : 0;
        long signalled = signals.get();
        int spins = 0;
        waiters.incrementAndGet();
        lock.lock();
        try {
            while (true) {
                // A pass seen is a success, also at a look begun after the bound when an update
                // went through the event meanwhile (its signal or the lock hand-off came late) or
                // the wait polls (a poll's pace is its only delay). A pass that only a write
                // behind the event's back made, seen by a sleeping waiter at its bound, is a lost
                // wake-up: TIME_OUT, naming it, not a success at the bound's end.
                long left = bounded ? deadline - System.nanoTime() : Long.MAX_VALUE / 2;
                long v = value.getAsLong();
                boolean polling = polls.getAsBoolean();
                if (passed(v, threshold, mask) && (left > 0 || polling || signals.get() != signalled)) {
                    return;
                }
                if (left <= 0) {
                    throw new DocaException(DocaError.DOCA_ERROR_TIME_OUT, passed(v, threshold, mask)
                            ? String.format("%s: (0x%x & 0x%x) > 0x%x holds only at the look after its %d ms bound, and no update went through"
                                    + " the event meanwhile (a write behind its back: its waiters were never woken)", what, v, mask, threshold,
                                    TimeUnit.NANOSECONDS.toMillis(timeoutNanos))
                            : String.format("%s: (0x%x & 0x%x) > 0x%x did not hold within %d ms", what, v, mask, threshold,
                                    TimeUnit.NANOSECONDS.toMillis(timeoutNanos)));
                }
                if (polling) {
                    lock.unlock();
                    try {
                        if (++spins > SPINS) {
                            LockSupport.parkNanos(Math.min(POLL_NANOS, left));
                        } else if (yield) {
                            Thread.yield();
                        } else {
                            Thread.onSpinWait();
                        }
                    } finally {
                        lock.lock();
                    }
                } else {
                    changed.awaitNanos(left);
                }
                if (Thread.currentThread().isInterrupted()) {
                    throw new DocaException(DocaError.DOCA_ERROR_AGAIN, what + ": interrupted");
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DocaException(DocaError.DOCA_ERROR_AGAIN, what + ": interrupted", e);
        } finally {
            lock.unlock();
            waiters.decrementAndGet();
        }
    }

    /** The threads inside a wait now. */
    int waiting() {
        return waiters.get();
    }

    /** After an update: wakes the sleeping waiters, if any (no lock when none). */
    void wakeIfWaited() {
        signals.incrementAndGet();
        if (waiters.get() != 0) {
            wakeAll();
        }
    }

    /** Wakes every waiter (stop, destroy: they see the state and end). */
    void wakeAll() {
        signals.incrementAndGet();
        lock.lock();
        try {
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
