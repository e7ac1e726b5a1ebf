package org.peerdirect.hca.dpa;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The NIC side of the DPA threads: CQs the firmware bound to a thread ({@code cqc.apu_cq}, element
 * type thread), their completion events (counted and triggered) and the lost-wake-up check (C7)
 * run when a thread reschedules. {@link DpaUnit}'s public {@code bindCq}, {@code unbindCq} and
 * {@code cqEvent} delegate here.
 *
 * <p>Lock rule: a thread's {@code boundCqs}, {@code cqEvents} and {@code latched} are read and
 * written under the RTOS lock; {@link #cqThreads} is concurrent and needs none.
 */
final class DpaCqs {

    private final DpaUnit unit;
    private final Rtos rtos;
    /** CQ number → the thread it is bound to. */
    private final Map<Integer, Integer> cqThreads = new ConcurrentHashMap<>();

    DpaCqs(DpaUnit unit) {
        this.unit = unit;
        this.rtos = unit.rtos;
    }

    /** The firmware bound CQ {@code cqn} to thread {@code tid} ({@code cqc.apu_cq}, element type thread). */
    void bindCq(int cqn, int tid) {
        DpaThread t = unit.thread(tid);
        cqThreads.put(cqn, tid);
        rtos.lock.lock();
        try {
            t.boundCqs.add(cqn);
            t.cqEvents.put(cqn, 0L);
        } finally {
            rtos.lock.unlock();
        }
    }

    void unbindCq(int cqn) {
        Integer tid = cqThreads.remove(cqn);
        DpaThread t = tid == null ? null : unit.threads().get(tid);
        if (t != null) {
            rtos.lock.lock();
            try {
                t.boundCqs.remove(cqn);
                t.cqEvents.remove(cqn);
            } finally {
                rtos.lock.unlock();
            }
        }
    }

    /** Thread {@code tid} is gone: no CQ is bound to it any more. */
    void forget(int tid) {
        cqThreads.values().removeIf(v -> v == tid);
    }

    /**
     * A completion event of CQ {@code cqn} (a CQE on it armed, an arm that fired, a zero CQE), whose
     * element is DPA thread {@code tid}. Counted and triggered in one RTOS critical section: the
     * lost wake-up check compares the count with the CQ's raised events and must see either both
     * (received, trigger latched) or neither (on its way).
     */
    boolean cqEvent(int cqn, int tid) {
        DpaThread t = unit.threads().get(tid);
        if (t == null) {
            return false;
        }
        rtos.lock.lock();
        try {
            t.cqEvents.computeIfPresent(cqn, (k, n) -> n + 1);
            return rtos.trigger(t);
        } finally {
            rtos.lock.unlock();
        }
    }

    /**
     * C7: a thread rescheduling while one of its CQs is not armed and has no event on its way will
     * not be woken by its next CQE (unless a trigger is latched already: an event received during
     * this activation, or an arm that fired at once, latches one).
     *
     * <p>Order: the CQ's snapshot (armed, events raised) first, then the received count and the
     * latch under the RTOS lock. Not armed, the CQ raises no further event until this thread arms
     * it, so the raised count is final; received below it means an event is being delivered and
     * will trigger the thread; received equal to it with no latch means every event was consumed
     * by activations that have run.
     */
    void lostWakeup(DpaThread t) {
        List<Integer> cqs;
        rtos.lock.lock();
        try {
            if (t.latched) {
                return;
            }
            cqs = List.copyOf(t.boundCqs);
        } finally {
            rtos.lock.unlock();
        }
        for (int cqn : cqs) {
            DpaNic.CqState s = unit.nic.cqState(cqn);
            if (s != null && !s.armed() && !onItsWayOrLatched(t, cqn, s.eventsRaised())) {
                unit.mm.report(new Finding("C7", t.process.id, t.id, Sites.here(), "reschedule with CQ 0x"
                        + Integer.toHexString(cqn) + " not armed (pi " + s.producerIndex() + ", ci " + s.consumerIndex()
                        + "): its next CQE will not trigger the thread (flexio_dev_cq_arm before reschedule)"), t.process);
            }
        }
    }

    private boolean onItsWayOrLatched(DpaThread t, int cqn, long raised) {
        rtos.lock.lock();
        try {
            return t.latched || t.cqEvents.getOrDefault(cqn, raised) < raised;
        } finally {
            rtos.lock.unlock();
        }
    }
}
