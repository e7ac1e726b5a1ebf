package org.peerdirect.hca.dpa;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Wall-clock latency from a trigger that found its thread waiting (a CQE on its armed CQ, a zero
 * CQE, an activation, the host's run) to the handler's entry on an EU: the last {@link #CAPACITY}
 * samples, perftest-style percentiles on demand (the bench's "CQE written → handler entry"). A
 * trigger latched while the thread ran is not sampled: its wait is the running activation's rest.
 * The model's cost (RTOS lock, EU grant, virtual-thread start), never a hardware figure.
 *
 * <p>Lock-free: recorders are the activations' threads; a reader copies what is there.
 */
final class WakeSamples {

    static final int CAPACITY = 1 << 16;
    private final AtomicLongArray ring = new AtomicLongArray(CAPACITY);
    private final AtomicLong count = new AtomicLong();

    void record(long nanos) {
        long n = count.getAndIncrement();
        ring.set((int) (n & (CAPACITY - 1)), nanos);
    }

    /** Samples taken so far (all, not only those kept). */
    long count() {
        return count.get();
    }

    /** The {@code ps} percentiles (0..100) of the kept samples, nearest rank; empty samples give zeros. */
    long[] percentiles(double... ps) {
        int n = (int) Math.min(count.get(), CAPACITY);
        long[] s = new long[n];
        for (int i = 0; i < n; i++) {
            s[i] = ring.get(i);
        }
        Arrays.sort(s);
        long[] out = new long[ps.length];
        for (int i = 0; i < ps.length; i++) {
            if (ps[i] < 0 || ps[i] > 100) {
                throw new IllegalArgumentException("percentile " + ps[i] + " is not in 0..100");
            }
            out[i] = n == 0 ? 0 : s[Math.min(n - 1, Math.max(0, (int) Math.ceil(ps[i] / 100 * n) - 1))];
        }
        return out;
    }

    void reset() {
        count.set(0);
    }
}
