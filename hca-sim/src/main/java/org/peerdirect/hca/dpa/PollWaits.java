package org.peerdirect.hca.dpa;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;
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
 * {@link #traced} (the waits a JFR recording follows, {@link DpaEvents.PollWait}) is guarded by
 * {@link #lock}.
 *
 * <p>{@link #spin} is the bounded alternative to {@link #await} for a hart whose traffic is flowing
 * ({@link DpaConfig#pollSpin}): it watches {@link #epoch} with {@link Thread#onSpinWait} for at most
 * its bound, keeping its carrier, and never parks.
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
    /** Waits a recording follows: a writer's signal stamps each one's first signal (lock). */
    private final List<DpaEvents.PollWait> traced = new ArrayList<>();
    /** Spins that saw a write, spins that reached their bound, nanoseconds spent spinning. */
    private final LongAdder spunWoken = new LongAdder();
    private final LongAdder spunOut = new LongAdder();
    private final LongAdder spunNanos = new LongAdder();

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
                if (!traced.isEmpty()) {
                    long now = System.nanoTime();
                    for (DpaEvents.PollWait e : traced) {
                        if (e.signalled == 0) {
                            e.signalled = now;
                        }
                    }
                }
                changed.signalAll();
            } finally {
                lock.unlock();
            }
        }
    }

    /** {@link #await(long, long, DpaEvents.PollWait)} untraced. */
    boolean await(long seen, long nanos) {
        return await(seen, nanos, null);
    }

    /**
     * Waits until DPA memory was written since {@code seen} was read from {@link #epoch()}, at most
     * {@code nanos}; interruption ends the wait (the flag stays set). The caller holds no lock.
     * {@code trace} (null unless a recording wants it) gets the first signal's time and the wait's end.
     *
     * @return true when memory changed, false when the bound passed or the wait was interrupted
     */
    boolean await(long seen, long nanos, DpaEvents.PollWait trace) {
        lock.lock();
        try {
            waiters++;
            if (trace != null) {
                traced.add(trace);
            }
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
                if (trace != null) {
                    traced.remove(trace);
                    trace.woke = System.nanoTime();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Watches for a write since {@code seen} for at most {@code nanos}, spinning ({@link
     * Thread#onSpinWait}) on the caller's carrier: no park, so no wake-up to pay when the write
     * comes. The caller keeps its carrier permit (a spinning hart is a polling hart).
     *
     * @return true when memory changed within the bound
     */
    boolean spin(long seen, long nanos) {
        long start = System.nanoTime();
        long now = start;
        boolean saw;
        while (!(saw = epoch != seen) && now - start < nanos) {
            Thread.onSpinWait();
            now = System.nanoTime();
        }
        spunNanos.add(now - start);
        (saw ? spunWoken : spunOut).increment();
        return saw;
    }

    /** {spins that saw a write, spins that reached their bound, nanoseconds spent spinning}. */
    long[] spinCounts() {
        return new long[] {spunWoken.sum(), spunOut.sum(), spunNanos.sum()};
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
