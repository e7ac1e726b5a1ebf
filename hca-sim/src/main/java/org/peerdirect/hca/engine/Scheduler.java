package org.peerdirect.hca.engine;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
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
            Thread t = new Thread(() -> {
                preciseTimers();
                r.run();
            }, name + "-timer");
            t.setDaemon(true);
            return t;
        });
        timer.setRemoveOnCancelPolicy(true);
    }

    /** {@code PR_SET_TIMERSLACK} in {@code include/uapi/linux/prctl.h}. */
    private static final int PR_SET_TIMERSLACK = 29;

    /**
     * Asks Linux for 1 ns of timer slack on the calling thread ({@code prctl(PR_SET_TIMERSLACK,
     * 1)}): a thread's timed waits may otherwise end up to 50 µs late (the default slack), which
     * made the smallest RNR timer, 10 µs, take about 90 µs here; the hardware's timers are
     * precise. Elsewhere than Linux, or without native access, the default stays.
     */
    static void preciseTimers() {
        try {
            Linker linker = Linker.nativeLinker();
            MethodHandle prctl = linker.downcallHandle(linker.defaultLookup().find("prctl").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG), Linker.Option.firstVariadicArg(1));
            int ignored = (int) prctl.invokeExact(PR_SET_TIMERSLACK, 1L); // -1 (a kernel refusing it): the default slack stays
        } catch (Throwable notAvailable) {
            // no prctl (not Linux) or native access denied: timers keep the default slack
        }
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
