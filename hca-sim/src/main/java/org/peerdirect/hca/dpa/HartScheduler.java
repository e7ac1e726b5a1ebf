package org.peerdirect.hca.dpa;

import java.time.Duration;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * How activations share the carriers: {@link DeterministicScheduler} (one hart at a time, seeded)
 * or {@link ConcurrentScheduler} (virtual threads). Each activation runs on its own virtual
 * thread; the scheduler decides when it may proceed.
 */
interface HartScheduler {

    /** Starts {@code r}'s body on a new virtual thread; it proceeds when the scheduler says so. */
    void start(Runner r, Runnable body);

    /** A scheduling point of {@code r} (every ISA call). */
    void point(Runner r);

    /** {@code r} waits (a continuable yield) until {@link #resume}; returns when resumed. */
    void block(Runner r);

    /**
     * {@code r} polls DPA memory nothing wrote since its quiet stretch began ({@link PollWaits}):
     * runs {@code wait} without holding what lets other activations proceed. A scheduler that
     * cannot let a hart wait so (the deterministic one: its interleavings are the seed's) returns
     * false at once without running it.
     */
    boolean pollWait(Runner r, Runnable wait);

    /** Makes a blocked {@code r} proceed again (it may have been resumed before it blocked). */
    void resume(Runner r);

    /** Lets queued activations proceed (the deterministic scheduler runs harts only when the host waits). */
    void drive();

    /** {@code r}'s activation ended; its virtual thread returns after this. */
    void exit(Runner r);

    /** Waits until no activation runs or waits for a hart; false on timeout. */
    boolean awaitIdle(Duration timeout);

    /** Activations started and not exited (blocked ones included): the leak check. */
    int live();

    /**
     * Waits on {@code idle} under {@code lock} until {@code done} holds, at most {@code timeout}:
     * both schedulers' {@link #awaitIdle}. {@code done} is read with the lock held; false on timeout
     * or interrupt (the interrupt stays set).
     */
    static boolean awaitUntil(ReentrantLock lock, Condition idle, BooleanSupplier done, Duration timeout) {
        long left = timeout.toNanos();
        lock.lock();
        try {
            while (!done.getAsBoolean()) {
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
}
