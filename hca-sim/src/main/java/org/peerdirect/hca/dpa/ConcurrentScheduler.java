package org.peerdirect.hca.dpa;

import java.time.Duration;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Activations as virtual threads proceeding at once, at most one per carrier: a fair semaphore of
 * {@code availableProcessors} permits stands for the carriers. A busy-wait handler calls ISA
 * operations in its loop; every {@code budget} of them, when another activation waits, it gives
 * its permit back (the fair semaphore hands it to the first waiter) and, when an activation is
 * not even mounted yet ({@code unmounted}), parks for a microsecond so that its carrier is free
 * to mount it. {@code Thread.yield} is not enough: the JDK's scheduler let two spinners keep both
 * carriers for seconds while seven started activations never ran (found by a test). The park is
 * no synchronisation: it only unmounts the spinner; the permit orders who runs.
 *
 * <p>The permits and the count of unmounted activations are the JVM's, shared by the schedulers of
 * every DPA unit: the carriers are. With one semaphore per unit, two BlueField-3s in one JVM had
 * twice as many permits as carriers, and one unit's spinners (each waiting for a signal a thread of
 * the other unit had still to send) kept both carriers without ever seeing the other unit's
 * activations waiting (found by scenario 9, the all-to-all over two devices).
 *
 * <p>Lock: {@code lock} guards {@code running} and {@code live}. A runner holds a permit while it
 * runs and never while it waits for a resume.
 */
final class ConcurrentScheduler implements HartScheduler {

    private final int budget;
    private static final Semaphore carriers = new Semaphore(Math.max(1, Runtime.getRuntime().availableProcessors()), true);
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition idle = lock.newCondition();
    /** Activations started or resumed whose virtual thread has not run yet. */
    private static final AtomicInteger unmounted = new AtomicInteger();
    private int running;
    private int live;

    ConcurrentScheduler(int budget) {
        this.budget = budget;
    }

    @Override
    public void start(Runner r, Runnable body) {
        lock.lock();
        try {
            live++;
            running++;
        } finally {
            lock.unlock();
        }
        unmounted.incrementAndGet();
        Thread.ofVirtual().name("dpa-" + r.name()).start(() -> {
            unmounted.decrementAndGet();
            stampMounted(r);
            carriers.acquireUninterruptibly();
            stampCarrier(r);
            body.run();
        });
    }

    @Override
    public void point(Runner r) {
        if (++r.sinceYield >= budget) {
            r.sinceYield = 0;
            boolean starting = unmounted.get() > 0;
            if (starting || carriers.hasQueuedThreads()) {
                r.inScheduler = true; // waiting for a carrier is no stuck handler (the wall-clock watchdog)
                carriers.release();
                if (starting) {
                    LockSupport.parkNanos(1_000); // unmount, so the carrier can mount the waiting thread
                }
                carriers.acquireUninterruptibly();
                r.inScheduler = false;
            }
        }
    }

    /** The carrier's permit goes to whoever waits for one while {@code r} waits for memory to change. */
    @Override
    public boolean pollWait(Runner r, Runnable wait) {
        carriers.release();
        try {
            wait.run();
        } finally {
            carriers.acquireUninterruptibly();
        }
        return true;
    }

    @Override
    public void block(Runner r) {
        r.inScheduler = true;
        add(-1);
        carriers.release();
        r.turn.acquireUninterruptibly();
        unmounted.decrementAndGet();
        stampMounted(r);
        carriers.acquireUninterruptibly();
        stampCarrier(r);
        r.inScheduler = false;
    }

    /** {@link DpaEvents.Wake}'s hops, only when the RTOS stamped the grant (a recording wants them). */
    private static void stampMounted(Runner r) {
        r.mountedNanos = r.grantedNanos == 0 ? 0 : System.nanoTime();
    }

    private static void stampCarrier(Runner r) {
        r.carrierNanos = r.grantedNanos == 0 ? 0 : System.nanoTime();
    }

    @Override
    public void resume(Runner r) {
        add(1);
        unmounted.incrementAndGet();
        r.turn.release();
    }

    @Override
    public void drive() {
        // every activation proceeds on its own
    }

    @Override
    public void exit(Runner r) {
        lock.lock();
        try {
            live--;
            running--;
            idle.signalAll();
        } finally {
            lock.unlock();
        }
        carriers.release();
    }

    private void add(int d) {
        lock.lock();
        try {
            running += d;
            idle.signalAll();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public boolean awaitIdle(Duration timeout) {
        return HartScheduler.awaitUntil(lock, idle, () -> running == 0, timeout);
    }

    @Override
    public int live() {
        lock.lock();
        try {
            return live;
        } finally {
            lock.unlock();
        }
    }
}
