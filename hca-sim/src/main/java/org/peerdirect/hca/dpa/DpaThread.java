package org.peerdirect.hca.dpa;

import java.lang.invoke.MethodHandle;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * A DPA thread (the DPA_THREAD object): its entry point in the process image, argument, TLS,
 * affinity, and its RTOS state and accounting ({@code dpa:threads}). State fields are guarded by
 * the RTOS lock; the memory-model fields ({@code epoch}, {@code seq}, {@code observed}) by the
 * memory model's lock; the window entities and caches are touched only by the thread's own
 * activation (one at a time).
 */
final class DpaThread {

    final int id;
    final DpaProcess process;
    final Image.Symbol entry;
    final MethodHandle handle;
    final long arg;
    final long tls;
    final Affinity affinity;
    final boolean continuable;

    // RTOS state (RTOS lock)
    ThreadState state = ThreadState.CREATED;
    boolean latched;
    Runner runner;
    long activations;
    long triggersLatched;
    long triggersIgnored;
    final EnumMap<ActivationExit.Kind, Long> exits = new EnumMap<>(ActivationExit.Kind.class);
    final Set<Integer> boundCqs = new TreeSet<>();
    /** Completion events received per bound CQ ({@link DpaUnit#cqEvent}), against the CQ's raised count (C7). */
    final java.util.Map<Integer, Long> cqEvents = new java.util.HashMap<>();
    long rpcResult;
    /** When a trigger found the thread waiting (nanoTime; 0: none pending), for {@link WakeSamples}. */
    volatile long triggeredAt;

    // per-thread (the running activation only)
    int errno;
    Outbox outbox;
    final WindowEntity[] entities = {new WindowEntity(), new WindowEntity()};

    // memory model (its lock)
    long epoch;
    long seq;
    /** Per writer thread: {epoch, seq} of the latest of its stores this thread read. */
    final Map<Integer, long[]> observed = new HashMap<>();

    /** Objects this thread is inside now (C8, {@link ObjectUse}): written under its lock, by this thread's activations only. */
    int objectsHeld;

    DpaThread(int id, DpaProcess process, Image.Symbol entry, MethodHandle handle, long arg, long tls, Affinity affinity,
            boolean continuable) {
        this.id = id;
        this.process = process;
        this.entry = entry;
        this.handle = handle;
        this.arg = arg;
        this.tls = tls;
        this.affinity = affinity;
        this.continuable = continuable;
    }

    String name() {
        return entry.name() + "#" + id;
    }

    /** One line of {@code dpa:threads}. */
    String describe() {
        return String.format("thread %d %s process %d %s eu %s activations %d latched %d ignored %d exits %s cqs %s",
                id, entry.name(), process.id, state, runner == null ? "-" : String.valueOf(runner.eu), activations,
                triggersLatched, triggersIgnored, exits, boundCqs);
    }
}
