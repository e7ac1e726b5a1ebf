package org.peerdirect.hca.dpa;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The wall-clock watchdog beside the cycle watchdog ({@link DpaConfig#watchdogCycles}), for the
 * concurrent scheduler: the RTOS preempts, counts and stops a handler only at its ISA calls, and
 * the verifier's {@code loop-without-call} rule is a heuristic (a loop calling only JDK methods
 * passes). Every {@link DpaConfig#wallWatchdog} it looks at each activation on an EU: one that made
 * no ISA call since the last look (and is not waiting for a carrier or a resume) is stuck in Java
 * code. Its process ends ({@link ProcessStatus#WATCHDOG}, the stuck line taken from the virtual
 * thread's stack) and the RTOS abandons the activation ({@link Rtos#abandon}): its EU and thread
 * are free at once, so destroys return (the bounded stop). The Java code itself cannot be stopped:
 * it keeps its carrier until it returns on its own, and the unit counts it live until then.
 *
 * <p>Lock: {@code lock} guards {@code closed} and the wake-up; {@code seen} is the watchdog
 * thread's own.
 */
final class WallWatchdog implements Runnable {

    private final DpaUnit unit;
    private final long periodNanos;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition wake = lock.newCondition();
    private boolean closed;
    /** ISA calls of each runner at the last look. */
    private final Map<Runner, Long> seen = new HashMap<>();

    WallWatchdog(DpaUnit unit, Duration period) {
        this.unit = unit;
        this.periodNanos = period.toNanos();
    }

    /** Starts the watchdog's platform daemon thread. */
    static WallWatchdog start(DpaUnit unit, Duration period) {
        WallWatchdog w = new WallWatchdog(unit, period);
        Thread t = new Thread(w, "dpa-wall-watchdog");
        t.setDaemon(true);
        t.start();
        return w;
    }

    @Override
    public void run() {
        while (awaitPeriod()) {
            look();
        }
    }

    /** Waits one period (a timer, not a synchronisation: the look checks what it finds); false once closed. */
    private boolean awaitPeriod() {
        lock.lock();
        try {
            long left = periodNanos;
            while (!closed && left > 0) {
                left = wake.awaitNanos(left);
            }
            return !closed;
        } catch (InterruptedException e) {
            return false;
        } finally {
            lock.unlock();
        }
    }

    private void look() {
        Map<Runner, Long> now = new HashMap<>();
        for (DpaThread t : unit.threads().values()) {
            Runner r = t.runner;
            if (r == null || r.eu < 0 || r.javaThread == null || r.inScheduler || r.abandoned) {
                continue;
            }
            long calls = r.calls;
            Long before = seen.get(r);
            if (before != null && before == calls) {
                stuck(r);
            } else {
                now.put(r, calls);
            }
        }
        seen.clear();
        seen.putAll(now);
    }

    private void stuck(Runner r) {
        String site = "?";
        for (StackTraceElement f : r.javaThread.getStackTrace()) {
            if (f.getClassLoaderName() != null && f.getClassLoaderName().startsWith(ImageLoader.NAME)) {
                site = f.getClassName() + "." + f.getMethodName() + ":" + f.getLineNumber();
                break;
            }
        }
        unit.rtos.abandon(r); // first: once the host sees the status, the EU and thread are free
        unit.fail(r.thread.process, ProcessStatus.WATCHDOG, "wall-clock watchdog: handler " + r.name() + " made no ISA call for "
                + TimeUnit.NANOSECONDS.toMillis(periodNanos) + " ms, at " + site + " (a Java loop without ISA calls): the DPA OS took its EU back",
                r.thread.id, site);
    }

    void close() {
        lock.lock();
        try {
            closed = true;
            wake.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
