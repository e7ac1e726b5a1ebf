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
 * <p>A waiter names the 64-byte lines its quiet row loaded ({@link Watch}, at most {@value
 * Watch#LINES}; more, or none named: any write): once it waits, only a write touching one of them
 * wakes it. Before, every write woke every waiter: in the DPA ping-pong each hart's stores to its
 * own queues woke the other hart ~4 times per round trip for nothing (JFR, {@link DpaEvents.PollWait}),
 * each wake a mount, 64 loads and a park on the machine's two cores. A write between the row's
 * start and the waiter's registration still ends the wait at once (the epoch moved): filtering
 * starts only once the waiter is registered, where the lock orders it with writers.
 *
 * <p>Lock: {@link #lock} orders a waiter's last look at {@link #epoch} with a writer's signal. Both
 * fields are volatile: a writer sets {@code epoch}, then reads {@code waiters}; a waiter raises
 * {@code waiters}, then reads {@code epoch} (under the lock): one of them sees the other.
 * {@link #watching} and each registered {@link Watch}'s {@code hit} and trace stamps are guarded by
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
    /** The registered waiters' watches (lock). */
    private final List<Watch> watching = new ArrayList<>();
    /** Spins that saw a write, spins that reached their bound, nanoseconds spent spinning. */
    private final LongAdder spunWoken = new LongAdder();
    private final LongAdder spunOut = new LongAdder();
    private final LongAdder spunNanos = new LongAdder();

    /**
     * What a waiting hart watches: the 64-byte lines its quiet row loaded. Filled by its runner
     * alone while it polls ({@link #reset}, {@link #add}); read by writers only while registered,
     * under the lock.
     */
    static final class Watch {
        static final int LINES = 4;
        private final long[] lines = new long[LINES];
        /** Lines named; -1: too many, any write wakes. */
        private int n;
        /** A write touched a watched line since registration (lock). */
        private boolean hit;
        /** The wait a recording follows, or null (lock). */
        DpaEvents.PollWait trace;

        void reset() {
            n = 0;
        }

        /** The quiet row loaded DPA address {@code a}. */
        void add(long a) {
            if (n < 0) {
                return;
            }
            long line = a >>> 6;
            for (int i = 0; i < n; i++) {
                if (lines[i] == line) {
                    return;
                }
            }
            if (n == LINES) {
                n = -1;
            } else {
                lines[n++] = line;
            }
        }

        /** Whether a write of {@code len} bytes at {@code a} (len 0: unknown, anywhere) may change what this row read. */
        boolean touches(long a, long len) {
            if (n <= 0 || len <= 0) {
                return true;
            }
            long first = a >>> 6;
            long last = (a + len - 1) >>> 6;
            for (int i = 0; i < n; i++) {
                if (lines[i] >= first && lines[i] <= last) {
                    return true;
                }
            }
            return false;
        }
    }

    /** The current write count: a hart starting a quiet stretch remembers it. */
    long epoch() {
        return epoch;
    }

    /** DPA memory was written somewhere (no address known): every waiting hart looks again. */
    void written() {
        written(0, 0);
    }

    /** {@code len} bytes of DPA memory at {@code a} were written: harts waiting on those lines look again. */
    void written(long a, long len) {
        EPOCH.getAndAdd(this, 1L);
        if (waiters != 0) {
            signal(a, len);
        }
    }

    private void signal(long a, long len) {
        lock.lock();
        try {
            boolean any = false;
            long now = 0;
            for (Watch w : watching) {
                if (!w.hit && w.touches(a, len)) {
                    w.hit = true;
                    any = true;
                    if (w.trace != null && w.trace.signalled == 0) {
                        w.trace.signalled = now == 0 ? now = System.nanoTime() : now;
                    }
                }
            }
            if (any) {
                changed.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    /** {@link #await(long, long, Watch)} woken by any write. */
    boolean await(long seen, long nanos) {
        return await(seen, nanos, new Watch());
    }

    /**
     * Waits until DPA memory was written since {@code seen} was read from {@link #epoch()}: at once
     * when the epoch moved already, else until a write touches a line {@code watch} names, at most
     * {@code nanos}; interruption ends the wait (the flag stays set). The caller holds no lock.
     * {@code watch.trace} (null unless a recording wants it) gets the first signal's time and the
     * wait's end.
     *
     * @return true when memory changed, false when the bound passed or the wait was interrupted
     */
    boolean await(long seen, long nanos, Watch watch) {
        lock.lock();
        try {
            waiters++;
            watch.hit = epoch != seen;
            watching.add(watch);
            try {
                while (!watch.hit) {
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
                watching.remove(watch);
                if (watch.trace != null) {
                    watch.trace.woke = System.nanoTime();
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
