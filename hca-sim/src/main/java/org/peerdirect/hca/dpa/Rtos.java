package org.peerdirect.hca.dpa;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.dpa.ThreadState.Event;

/**
 * The DPA RTOS: triggers, the run queue of activations waiting for an EU, EU grants by affinity,
 * the ends of activations (reschedule, finish, retrigger, continuable yield) and stopping a
 * process's threads. A trigger to a running thread is latched once and re-runs it after its
 * reschedule (open question 2 of DPA_MODEL.md §6: latched, because the drain–arm–reschedule
 * pattern loses a completion otherwise); further triggers while one is latched are counted and
 * ignored.
 *
 * <p>Lock: {@code lock} guards every thread's RTOS state, the run queue and the EUs. It is taken
 * before the scheduler's lock, never after; nothing here calls the memory model or the NIC, but
 * for waking harts that wait out a poll ({@link PollWaits}) after the lock is released, so that a
 * stopped one unwinds now rather than at its wait's bound.
 */
final class Rtos {

    private final DpaUnit unit;
    final ReentrantLock lock = new ReentrantLock();
    private final Condition stopped = lock.newCondition();
    private final ArrayDeque<DpaThread> runQueue = new ArrayDeque<>();

    Rtos(DpaUnit unit) {
        this.unit = unit;
    }

    /** {@code flexio_event_handler_run}: the thread becomes triggerable. */
    void run(DpaThread t) {
        lock.lock();
        try {
            t.state = t.state.next(Event.RUN);
        } finally {
            lock.unlock();
        }
    }

    /** A trigger (CQE on an armed CQ, zero CQE, activate, host run); false when it was ignored. */
    boolean trigger(DpaThread t) {
        lock.lock();
        try {
            if (t.process.ended) {
                t.triggersIgnored++;
                return false;
            }
            switch (t.state) {
                case WAITING, SUSPENDED -> {
                    t.triggeredAt = System.nanoTime();
                    t.state = t.state.next(Event.TRIGGER);
                    runQueue.add(t);
                    grant();
                    return true;
                }
                case RUNNING -> {
                    if (!t.latched) {
                        t.latched = true;
                        t.triggersLatched++;
                        return true;
                    }
                    t.triggersIgnored++;
                    return false;
                }
                default -> {
                    t.triggersIgnored++;
                    return false;
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** Grants free EUs to queued activations in order, as their affinities allow. */
    private void grant() {
        assert lock.isHeldByCurrentThread();
        for (Iterator<DpaThread> it = runQueue.iterator(); it.hasNext();) {
            DpaThread t = it.next();
            if (t.process.ended) {
                it.remove();
                continue;
            }
            int eu = unit.eus.acquire(t.affinity);
            if (eu < 0) {
                continue;
            }
            it.remove();
            t.state = t.state.next(Event.EU_GRANTED);
            t.activations++;
            long granted = DpaEvents.Wake.enabled() ? System.nanoTime() : 0;
            if (t.runner != null) {
                t.runner.eu = eu;
                t.runner.grantedNanos = granted;
                unit.scheduler.resume(t.runner);
            } else {
                Runner r = new Runner(unit, t, eu);
                t.runner = r;
                r.grantedNanos = granted;
                unit.scheduler.start(r, r::body);
            }
        }
    }

    /** The end of an activation, on its own thread: the EU goes back, then the scheduler lets it go. */
    void activationEnded(Runner r, ActivationExit.Kind kind) {
        DpaThread t = r.thread;
        lock.lock();
        try {
            if (r.abandoned) { // abandon() let its EU and thread go: only the scheduler still counts it
                unit.scheduler.exit(r);
                stopped.signalAll();
                return;
            }
            if (r.eu >= 0) {
                unit.eus.release(r.eu);
                r.eu = -1;
            }
            t.runner = null;
            t.exits.merge(kind, 1L, Long::sum);
            if (kind == ActivationExit.Kind.PROCESS_END || t.process.ended) {
                t.state = t.state.next(Event.PROCESS_END);
            } else {
                t.state = t.state.next(switch (kind) {
                    case RESCHEDULE -> Event.RESCHEDULE;
                    case FINISH -> Event.FINISH;
                    default -> Event.RETRIGGER;
                });
                if (t.state == ThreadState.RUNNABLE) {
                    runQueue.add(t);
                } else if (t.state == ThreadState.WAITING && t.latched) {
                    t.state = t.state.next(Event.TRIGGER);
                    runQueue.add(t);
                }
            }
            t.latched = false;
            grant();
            unit.scheduler.exit(r);
            stopped.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /**
     * The wall-clock watchdog gives up on {@code r}, stuck in Java code of an ended process: its
     * EU goes back and its thread lets it go now (PROCESS_ENDED), so the process's destroy need not
     * wait for it; its end later only leaves the scheduler ({@link #activationEnded}).
     */
    void abandon(Runner r) {
        DpaThread t = r.thread;
        lock.lock();
        try {
            if (r.abandoned || t.runner != r) {
                return; // it ended meanwhile
            }
            r.abandoned = true;
            r.killed = true;
            if (r.eu >= 0) {
                unit.eus.release(r.eu);
                r.eu = -1;
            }
            t.runner = null;
            t.exits.merge(ActivationExit.Kind.PROCESS_END, 1L, Long::sum);
            if (t.state != ThreadState.PROCESS_ENDED) {
                t.state = t.state.next(Event.PROCESS_END);
            }
            t.latched = false;
            grant();
            stopped.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** A continuable yield: the EU goes back; a latched trigger resumes the thread at once. */
    void suspend(Runner r) {
        DpaThread t = r.thread;
        lock.lock();
        try {
            unit.eus.release(r.eu);
            r.eu = -1;
            t.state = t.state.next(Event.YIELD);
            if (t.latched) {
                t.latched = false;
                t.state = t.state.next(Event.TRIGGER);
                runQueue.add(t);
            }
            grant();
        } finally {
            lock.unlock();
        }
    }

    /** No new activations of {@code p}; running ones unwind at their next ISA call, suspended ones are woken to. */
    void endProcess(DpaProcess p) {
        lock.lock();
        try {
            p.ended = true;
            runQueue.removeIf(t -> t.process == p);
            for (DpaThread t : p.threads.values()) {
                Runner r = t.runner;
                if (r == null) {
                    if (t.state != ThreadState.PROCESS_ENDED) {
                        t.state = t.state.next(Event.PROCESS_END);
                    }
                } else {
                    r.killed = true;
                    if (r.eu < 0) { // suspended (or queued to resume): wake it to unwind
                        unit.scheduler.resume(r);
                    }
                }
            }
        } finally {
            lock.unlock();
        }
        unit.mm.polls.written(); // its harts waiting out a poll look again, see the end and unwind
    }

    /**
     * Stops one thread (its destroy while it runs): no new activations, the running or suspended
     * one unwinds at its next ISA call; the thread ends in PROCESS_ENDED, its process goes on.
     */
    void stopThread(DpaThread t) {
        lock.lock();
        try {
            runQueue.remove(t);
            Runner r = t.runner;
            if (r == null) {
                t.state = t.state.next(Event.PROCESS_END);
            } else {
                r.killed = true;
                if (r.eu < 0) {
                    unit.scheduler.resume(r);
                }
            }
        } finally {
            lock.unlock();
        }
        unit.mm.polls.written(); // as endProcess: a waiting hart of t unwinds now
    }

    /** Waits until no thread of {@code p} holds a runner; false on timeout (a handler looping without ISA calls). */
    boolean awaitStopped(DpaProcess p, Duration timeout) {
        return awaitStopped(p, true, timeout);
    }

    /** Waits until every thread of {@code p} (or only the stopped ones) let their runners go; false on timeout. */
    boolean awaitStopped(DpaProcess p, boolean all, Duration timeout) {
        long left = timeout.toNanos();
        lock.lock();
        try {
            unit.scheduler.drive();
            while (p.threads.values().stream().anyMatch(t -> t.runner != null && (all || t.runner.killed))) {
                if (left <= 0) {
                    return false;
                }
                left = stopped.awaitNanos(left);
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
