package org.peerdirect.hca.dpa;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One hart at a time: a baton (each runner's {@code turn} semaphore) passes between activations,
 * and at every scheduling point a seeded {@link Random} chooses whether the current activation
 * goes on or which ready one runs next. The host steps the DPA: activations it starts (a trigger,
 * a CQE) only queue, and harts run while the host waits in {@link #awaitIdle} (or for a process
 * to stop); so the host never races a hart, and the same seed replays the same interleaving and
 * the same memory-model outcome. NIC-side events raised by a hart (a doorbell, a zero CQE) happen
 * on that hart's thread, inside the interleaving.
 *
 * <p>Lock: {@code lock} guards {@code ready}, {@code current} and {@code live}; a runner blocks
 * on its own semaphore outside it.
 */
final class DeterministicScheduler implements HartScheduler {

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition idle = lock.newCondition();
    private final Random random;
    private final List<Runner> ready = new ArrayList<>();
    private Runner current;
    private int live;

    DeterministicScheduler(long seed) {
        random = new Random(seed);
    }

    /** A seeded interleaving keeps every poll: a hart waiting outside the baton would change it. */
    @Override
    public boolean pollWait(Runner r, Runnable wait) {
        return false;
    }

    @Override
    public void start(Runner r, Runnable body) {
        lock.lock();
        try {
            live++;
            ready.add(r);
        } finally {
            lock.unlock();
        }
        Thread.ofVirtual().name("dpa-" + r.name()).start(() -> {
            r.turn.acquireUninterruptibly();
            body.run();
        });
    }

    @Override
    public void point(Runner r) {
        Runner next;
        lock.lock();
        try {
            if (ready.isEmpty()) {
                return;
            }
            int i = random.nextInt(ready.size() + 1);
            if (i == ready.size()) {
                return;
            }
            next = ready.set(i, r);
            current = next;
        } finally {
            lock.unlock();
        }
        next.turn.release();
        r.turn.acquireUninterruptibly();
    }

    @Override
    public void block(Runner r) {
        lock.lock();
        try {
            dispatch();
        } finally {
            lock.unlock();
        }
        r.turn.acquireUninterruptibly();
    }

    @Override
    public void resume(Runner r) {
        lock.lock();
        try {
            ready.add(r);
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void drive() {
        lock.lock();
        try {
            if (current == null) {
                dispatch();
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void exit(Runner r) {
        lock.lock();
        try {
            live--;
            dispatch();
        } finally {
            lock.unlock();
        }
    }

    /** Gives the baton to a ready runner chosen by the seed, or marks the DPA idle. */
    private void dispatch() {
        assert lock.isHeldByCurrentThread();
        if (ready.isEmpty()) {
            current = null;
            idle.signalAll();
            return;
        }
        current = ready.remove(random.nextInt(ready.size()));
        current.turn.release();
    }

    @Override
    public boolean awaitIdle(Duration timeout) {
        drive();
        return HartScheduler.awaitUntil(lock, idle, () -> current == null && ready.isEmpty(), timeout);
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
