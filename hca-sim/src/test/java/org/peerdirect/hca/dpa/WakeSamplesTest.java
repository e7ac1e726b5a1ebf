package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** The wake-latency samples: nearest-rank percentiles over what is kept, the oldest overwritten, a reset. */
class WakeSamplesTest {

    @Test
    void percentilesAreNearestRankOverTheKeptSamples() {
        WakeSamples w = new WakeSamples();
        assertArrayEquals(new long[] {0, 0}, w.percentiles(50, 99), "nothing sampled yet");
        for (long v = 100; v >= 1; v--) {
            w.record(v);
        }
        assertArrayEquals(new long[] {1, 50, 99, 100}, w.percentiles(0, 50, 99, 100));
        assertEquals(100, w.count());
        for (int i = 0; i < WakeSamples.CAPACITY; i++) {
            w.record(7);
        }
        assertArrayEquals(new long[] {7, 7}, w.percentiles(0, 100), "the first 100 were overwritten");
        w.reset();
        assertEquals(0, w.count());
        assertThrows(IllegalArgumentException.class, () -> w.percentiles(101));
    }
}
