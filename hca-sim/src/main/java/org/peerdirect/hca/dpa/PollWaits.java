package org.peerdirect.hca.dpa;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Spin-wait elision [model]: a hart whose last loads of DPA memory all ran while nothing wrote DPA
 * memory is polling memory that cannot have changed; it waits here until something writes DPA
 * memory (or a bound passes) instead of spinning on a carrier.
 *
 * <p>Why: a BlueField-3's harts poll on cores of their own, beside a NIC of its own. The model runs
 * harts, the NIC's engine and the host's threads on the machine's few cores; two polling harts on
 * two cores keep the NIC's engine off the CPU for whole OS time slices, and a DPA ping-pong's round
 * trip became a matter of scheduler quanta (≈ 0.9 ms against 2.7 µs for the host's own). The waiting
 * hart's observable behaviour is the spinning hart's: its next load returns what the spinning one
 * would have read once memory changed; its virtual cycles are charged as if it had kept polling.
 *
 * <p>{@link #epoch} counts writes to DPA memory: every hart store and atomic, every NIC write and
 * atomic. Racing increments may count two writes as one; "changed" is all a waiter needs, and the
 * wait's bound covers any write not counted (a firmware write to DPA memory, say): a missed wake
 * costs at most the bound, never a hang or a wrong value.
 *
 * <p>Lock: {@link #lock} orders a waiter's last look at {@link #epoch} with a writer's signal. Both
 * fields are volatile: a writer sets {@code epoch}, then reads {@code waiters}; a waiter raises
 * {@code waiters}, then reads {@code epoch} (under the lock): one of them sees the other.
 */
final class PollWaits {

    private static final VarHandle EPOCH;
    static {
        try {
            EPOCH = MethodHandles.lookup().findVarHandle(PollWaits.class, "epoch", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private volatile long epoch;
    private volatile int waiters;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    /** Waits that ended by a write and waits that ended by the bound (for tests and {@code dpa:eus}). */
    private long woken;
    private long timedOut;

    /** The current write count: a hart starting a quiet stretch remembers it. */
    long epoch() {
        return epoch;
    }

    /** DPA memory was written: waiting harts look again. */
    void written() {
        EPOCH.getAndAdd(this, 1L);
        if (waiters != 0) {
            lock.lock();
            try {
                changed.signalAll();
            } finally {
                lock.unlock();
            }
        }
    }

    /**
     * Waits until DPA memory was written since {@code seen} was read from {@link #epoch()}, at most
     * {@code nanos}; interruption ends the wait (the flag stays set). The caller holds no lock.
     *
     * @return true when memory changed, false when the bound passed or the wait was interrupted
     */
    boolean await(long seen, long nanos) {
        lock.lock();
        try {
            waiters++;
            try {
                while (epoch == seen) {
                    if (nanos <= 0) {
                        timedOut++;
                        return false;
                    }
                    nanos = changed.awaitNanos(nanos);
                }
                if (nanos <= 0) { // changed, but seen only after the bound: a write whose wake-up was missed
                    timedOut++;
                } else {
                    woken++;
                }
                return true;
            } finally {
                waiters--;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            lock.unlock();
        }
    }

    /** Harts waiting now. */
    int waiting() {
        return waiters;
    }

    /** {woken by a write before the bound, ended by the bound}. */
    long[] counts() {
        lock.lock();
        try {
            return new long[] {woken, timedOut};
        } finally {
            lock.unlock();
        }
    }
}
