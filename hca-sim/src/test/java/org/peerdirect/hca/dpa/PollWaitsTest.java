package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** {@link PollWaits} alone: a write wakes a waiter long before its bound; no write, the bound ends the wait. */
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
}
