package org.peerdirect.hca.dpa;

import java.util.BitSet;
import java.util.HashMap;
import java.util.Map;

/**
 * The partition's execution units (harts): which are busy, the OS-reserved ones (ids
 * {@code 0..reserved-1}, never given to user threads, as BF-3's 2), and the EU groups. Per-EU
 * counters are what {@code dpa:eus} shows. Not thread-safe: the RTOS calls it under its lock.
 */
final class ExecutionUnits {

    final int total;
    final int reserved;
    private final BitSet busy = new BitSet();
    private final Map<Integer, BitSet> groups = new HashMap<>();
    final long[] activations;
    /** Virtual counters per EU, written only by the activation running on it. */
    final long[] cycles;
    final long[] instRet;

    ExecutionUnits(int total, int reserved) {
        this.total = total;
        this.reserved = reserved;
        this.activations = new long[total];
        this.cycles = new long[total];
        this.instRet = new long[total];
    }

    /** The counters summed over the EUs: activations, cycles, instructions retired (the caller holds the RTOS lock). */
    long[] totals() {
        long[] t = new long[3];
        for (int e = 0; e < cycles.length; e++) {
            t[0] += activations[e];
            t[1] += cycles[e];
            t[2] += instRet[e];
        }
        return t;
    }

    /** Defines group {@code id} over {@code eus} (each a user EU of the partition). */
    void defineGroup(int id, BitSet eus) {
        if (eus.isEmpty() || eus.nextSetBit(0) < reserved || eus.length() > total) {
            throw new IllegalArgumentException("EU group " + id + " " + eus + ": EUs must be in " + reserved + ".." + (total - 1));
        }
        groups.put(id, (BitSet) eus.clone());
    }

    /** Refuses an affinity that names an EU or group outside the partition. */
    void check(Affinity a) {
        switch (a.kind()) {
            case STRICT -> {
                if (a.id() < reserved || a.id() >= total) {
                    throw new IllegalArgumentException("EU " + a.id() + " is outside the partition's user EUs "
                            + reserved + ".." + (total - 1));
                }
            }
            case GROUP -> {
                if (!groups.containsKey(a.id())) {
                    throw new IllegalArgumentException("EU group " + a.id() + " does not exist");
                }
            }
            case NONE -> {
            }
        }
    }

    /** A free EU the affinity allows (lowest id), now busy; -1 when none is free. */
    int acquire(Affinity a) {
        int eu = switch (a.kind()) {
            case STRICT -> busy.get(a.id()) ? -1 : a.id();
            case GROUP -> {
                BitSet g = (BitSet) groups.get(a.id()).clone();
                g.andNot(busy);
                yield g.isEmpty() ? -1 : g.nextSetBit(0);
            }
            case NONE -> {
                int f = busy.nextClearBit(reserved);
                yield f < total ? f : -1;
            }
        };
        if (eu >= 0) {
            busy.set(eu);
            activations[eu]++;
        }
        return eu;
    }

    void release(int eu) {
        if (!busy.get(eu)) {
            throw new IllegalStateException("EU " + eu + " released while free");
        }
        busy.clear(eu);
    }

    /** The groups EU {@code eu} belongs to (ids ascending). */
    java.util.List<Integer> groupsOf(int eu) {
        return groups.entrySet().stream().filter(e -> e.getValue().get(eu)).map(Map.Entry::getKey).sorted().toList();
    }

    int busyCount() {
        return busy.cardinality();
    }

    boolean isBusy(int eu) {
        return busy.get(eu);
    }
}
