package org.peerdirect.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

class BenchMainTest {

    @Test
    void bandwidthIsBytesPerNanosecond() {
        // 64 KiB in 4096 ns is 16 bytes/ns, 16 GB/s
        assertEquals(16.0, new BenchMain.Row("b", "size=65536", 4096, 1, 65536).gbPerSecond(), 1e-12);
        assertTrue(Double.isNaN(new BenchMain.Row("b", "", 10, 1, -1).gbPerSecond()), "no size, no bandwidth");
    }

    @Test
    void scoresInOtherUnitsAreConvertedToNanoseconds() {
        assertEquals(2_500.0, BenchMain.toNanos(2.5, TimeUnit.MICROSECONDS), 1e-9);
        assertEquals(7.0, BenchMain.toNanos(7, TimeUnit.NANOSECONDS), 1e-12);
    }
}
