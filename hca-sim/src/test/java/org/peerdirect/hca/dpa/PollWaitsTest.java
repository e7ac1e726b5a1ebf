package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/**
 * {@link PollWaits} alone: a write wakes a waiter long before its bound; no write, the bound ends
 * the wait; a waiter watching lines is woken only by a write touching one of them.
 */
class PollWaitsTest {

    @Test
    void aWriteWakesAWaiterBeforeItsBound() throws Exception {
        PollWaits w = new PollWaits();
        long seen = w.epoch();
        // a bound far beyond the join below: only the write's signal can end this wait in time
        CompletableFuture<Boolean> waiter = CompletableFuture.supplyAsync(() -> w.await(seen, TimeUnit.SECONDS.toNanos(60)));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (w.waiting() == 0) {
            assertTrue(System.nanoTime() < deadline, "the waiter waits");
            Thread.onSpinWait();
        }
        w.written();
        assertTrue(waiter.get(20, TimeUnit.SECONDS), "woken by the write");
        assertArrayEquals(new long[] {1, 0}, w.counts());
    }

    @Test
    void withoutAWriteTheBoundEndsTheWaitAndAnOldCountDoesNotWait() {
        PollWaits w = new PollWaits();
        long seen = w.epoch();
        assertFalse(w.await(seen, TimeUnit.MICROSECONDS.toNanos(50)), "nothing wrote");
        assertArrayEquals(new long[] {0, 1}, w.counts());
        w.written();
        assertTrue(w.await(seen, TimeUnit.SECONDS.toNanos(60)), "a write since the count was read: no wait at all");
        assertArrayEquals(new long[] {1, 1}, w.counts());
    }

    @Test
    void aWaiterWatchingItsLinesIsWokenOnlyByAWriteTouchingOne() throws Exception {
        PollWaits w = new PollWaits();
        PollWaits.Watch watch = new PollWaits.Watch();
        watch.add(0x1008); // the row polled two words of line 0x1000..0x103f
        watch.add(0x1010);
        // writes beside its line only: the wait ends by its (short) bound, not woken
        long seen = w.epoch();
        CompletableFuture<Boolean> waiter = CompletableFuture.supplyAsync(() -> w.await(seen, TimeUnit.MILLISECONDS.toNanos(300), watch));
        awaitWaiting(w);
        w.written(0x0fc0, 64); // the line before
        w.written(0x1040, 8); // the line after
        assertEquals(2, w.epoch() - seen, "both writes counted");
        assertFalse(waiter.get(20, TimeUnit.SECONDS), "neither touched a watched line: the bound ended the wait");
        assertArrayEquals(new long[] {0, 1}, w.counts());
        // a write straddling into its line wakes it long before a 60 s bound
        long seen2 = w.epoch();
        CompletableFuture<Boolean> again = CompletableFuture.supplyAsync(() -> w.await(seen2, TimeUnit.SECONDS.toNanos(60), watch));
        awaitWaiting(w);
        w.written(0x0ff8, 16);
        assertTrue(again.get(20, TimeUnit.SECONDS), "woken by the write touching its line");
        assertArrayEquals(new long[] {1, 1}, w.counts());
    }

    private static void awaitWaiting(PollWaits w) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (w.waiting() == 0) {
            assertTrue(System.nanoTime() < deadline, "the waiter waits");
            Thread.onSpinWait();
        }
    }

    @Test
    void aWatchOfMoreLinesThanItKeepsIsWokenByAnyWrite() {
        PollWaits.Watch watch = new PollWaits.Watch();
        for (int i = 0; i <= PollWaits.Watch.LINES; i++) {
            watch.add(64L * i);
        }
        assertTrue(watch.touches(1 << 20, 8), "too many lines to name: any write");
        PollWaits.Watch none = new PollWaits.Watch();
        assertTrue(none.touches(1 << 20, 8), "no line named: any write");
        PollWaits.Watch one = new PollWaits.Watch();
        one.add(128);
        assertFalse(one.touches(192, 8));
        assertTrue(one.touches(0, 0), "a write of unknown place");
    }
}
