package org.peerdirect.hca.dpa;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Check C8 (DPA_MODEL.md §3.5): two harts using one non-thread-safe object at once. A device
 * library tells the silicon, through the ISA's {@code Dpa.objectEnter}/{@code objectLeave}
 * (a peerdirect ISA extension: a checker annotation, no cycles, no scheduling point), that its
 * call on the object at DPA address {@code object} began or ended; the silicon knows nothing of
 * what the object is (a DOCA completion context, an RDMA handle: opaque addresses of the
 * caller's process). A thread entering an object another thread is inside is reported with both
 * call sites; strict mode ends the process through the memory model's report, as C1..C7.
 *
 * <p>Uses are re-entrant per thread (a library call calling another on the same object). An
 * activation that unwinds inside a call (a process error, the watchdog) leaves nothing behind:
 * {@link #activationEnded} drops what its thread held; a destroyed process's entries go with it.
 * In {@link CheckMode#OFF} the hart never calls here (a field check in {@code Runner}).
 *
 * <p>Lock: {@code lock} guards {@code inUse} and every thread's {@code objectsHeld}; findings are
 * reported after it is released (reporting may end a process, which takes the RTOS lock).
 */
final class ObjectUse {

    /** One object of one process. */
    private record Key(int process, long object) {
    }

    /** A thread inside the object, how deep, and the activation (its Java stack gives its call site on a finding). */
    private static final class Holder {
        final DpaThread thread;
        final Runner runner;
        int depth = 1;

        Holder(Runner runner) {
            this.thread = runner.thread;
            this.runner = runner;
        }
    }

    private final DpaUnit unit;
    private final ReentrantLock lock = new ReentrantLock();
    /** Objects in use → the threads inside (one, unless a C8 was found and warn mode let both go on). */
    private final Map<Key, List<Holder>> inUse = new HashMap<>();

    ObjectUse(DpaUnit unit) {
        this.unit = unit;
    }

    /**
     * The runner's thread begins a call on {@code object}; another thread inside it is C8. No stack
     * is walked unless there is a finding: the holder's call site is read from its Java stack while
     * this lock is held, when it cannot have left (leaving takes the lock), so its stack is still
     * inside its call (its innermost device line now, and the user's line that called the library).
     */
    void enter(Runner r, long object) {
        DpaThread t = r.thread;
        Key k = new Key(t.process.id, object);
        Holder other = null;
        String otherSite = null;
        lock.lock();
        try {
            List<Holder> hs = inUse.computeIfAbsent(k, x -> new ArrayList<>(1));
            Holder mine = null;
            for (Holder h : hs) {
                if (h.thread == t) {
                    mine = h;
                } else if (other == null) {
                    other = h;
                }
            }
            if (mine != null) {
                mine.depth++;
            } else {
                hs.add(new Holder(r));
                t.objectsHeld++;
            }
            if (other != null) {
                otherSite = Sites.of(other.runner.javaThread);
            }
        } finally {
            lock.unlock();
        }
        if (other != null) {
            unit.mm.report(new Finding("C8", t.process.id, t.id, Sites.here(), "entered object 0x" + Long.toHexString(object)
                    + " on EU " + r.eu + " while thread " + other.thread.id + " (" + other.thread.name() + ", EU " + other.runner.eu
                    + ") is inside it, now at " + otherSite
                    + ": the object is not thread-safe, two harts must not use it at once"), t.process);
        }
    }

    /** The runner's thread's call on {@code object} ended (a leave without an enter is ignored: the entry went with a C8 report's process). */
    void leave(Runner r, long object) {
        DpaThread t = r.thread;
        Key k = new Key(t.process.id, object);
        lock.lock();
        try {
            List<Holder> hs = inUse.get(k);
            if (hs == null) {
                return;
            }
            for (int i = 0; i < hs.size(); i++) {
                Holder h = hs.get(i);
                if (h.thread == t) {
                    if (--h.depth == 0) {
                        hs.remove(i);
                        t.objectsHeld--;
                        if (hs.isEmpty()) {
                            inUse.remove(k);
                        }
                    }
                    return;
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** An activation of {@code t} ended: objects it is still inside (it unwound mid-call) are let go. */
    void activationEnded(DpaThread t) {
        if (t.objectsHeld == 0) { // written by this thread's activations only, so its own may read it unlocked
            return;
        }
        lock.lock();
        try {
            inUse.values().removeIf(hs -> {
                hs.removeIf(h -> h.thread == t);
                return hs.isEmpty();
            });
            t.objectsHeld = 0;
        } finally {
            lock.unlock();
        }
    }

    /** Process {@code pid} is gone: its objects' entries go too. */
    void forget(int pid) {
        lock.lock();
        try {
            inUse.keySet().removeIf(k -> k.process == pid);
        } finally {
            lock.unlock();
        }
    }

    /** The objects {@code t} is inside now, as hex DPA addresses ({@code dpa:threads}). */
    List<String> held(DpaThread t) {
        List<String> l = new ArrayList<>();
        lock.lock();
        try {
            inUse.forEach((k, hs) -> {
                if (hs.stream().anyMatch(h -> h.thread == t)) {
                    l.add("0x" + Long.toHexString(k.object));
                }
            });
        } finally {
            lock.unlock();
        }
        return l;
    }
}
