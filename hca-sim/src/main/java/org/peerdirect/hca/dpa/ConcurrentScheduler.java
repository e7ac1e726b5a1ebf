package org.peerdirect.hca.dpa;

import java.time.Duration;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Activations as virtual threads on the JVM's carriers, all proceeding at once. A busy-wait
 * handler calls ISA operations in its loop; every {@code budget} of them it yields its carrier,
 * so a few carriers (2 cores in CI) never starve other EUs.
 *
 * <p>Lock: {@code lock} guards {@code running} and {@code live}.
 */
final class ConcurrentScheduler implements HartScheduler {

    private final int budget;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition idle = lock.newCondition();
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
        Thread.ofVirtual().name("dpa-" + r.name()).start(body);
    }

    @Override
    public void point(Runner r) {
        if (++r.sinceYield >= budget) {
            r.sinceYield = 0;
            Thread.yield();
        }
    }

    @Override
    public void block(Runner r) {
        add(-1);
        r.turn.acquireUninterruptibly();
    }

    @Override
    public void resume(Runner r) {
        add(1);
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
        long left = timeout.toNanos();
        lock.lock();
        try {
            while (running > 0) {
                if (left <= 0) {
                    return false;
                }
                left = idle.awaitNanos(left);
            }
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            lock.unlock();
        }
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
