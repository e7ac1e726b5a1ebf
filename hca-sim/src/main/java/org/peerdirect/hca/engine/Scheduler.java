package org.peerdirect.hca.engine;

import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The device's timer (rxe's retransmit and RNR timers): resumes a requester after an RNR back-off
 * or an ACK timeout. One daemon thread per device, stopped at removal.
 */
final class Scheduler {

    private final ScheduledThreadPoolExecutor timer;

    Scheduler(String name) {
        timer = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, name + "-timer");
            t.setDaemon(true);
            return t;
        });
        timer.setRemoveOnCancelPolicy(true);
    }

    /** Runs {@code task} after {@code nanos} (at most 10 s); false when the device is going away. */
    boolean schedule(Runnable task, long nanos) {
        try {
            timer.schedule(task, Math.min(nanos, TimeUnit.SECONDS.toNanos(10)), TimeUnit.NANOSECONDS);
            return true;
        } catch (RejectedExecutionException e) {
            return false;
        }
    }

    void shutdown() {
        timer.shutdownNow();
        try {
            timer.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
