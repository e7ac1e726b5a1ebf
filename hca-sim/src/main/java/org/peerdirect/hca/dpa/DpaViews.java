package org.peerdirect.hca.dpa;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The silicon-side tool views of a {@link DpaUnit} ({@code dpa:eus}, {@code dpa:mm},
 * {@code dpa:crash}): text lines, taken under the RTOS lock so a line never mixes two states.
 */
final class DpaViews {

    private DpaViews() {
    }

    /** {@code dpa:ps}: EUs used, then each process and its threads. */
    static List<String> ps(DpaUnit u) {
        List<String> l = new ArrayList<>();
        ExecutionUnits eus = u.eus;
        u.rtos.lock.lock();
        try {
            l.add(String.format("eus %d (reserved %d) busy %d", eus.total, eus.reserved, eus.busyCount()));
            for (int e = 0; e < eus.total; e++) {
                if (eus.activations[e] > 0) {
                    l.add(String.format("eu %d %s activations %d cycles %d instret %d", e, eus.isBusy(e) ? "busy" : "free",
                            eus.activations[e], eus.cycles[e], eus.instRet[e]));
                }
            }
            for (DpaProcess p : u.processes().values()) {
                l.add(p.describe());
                p.threads.values().forEach(t -> l.add("  " + t.describe()));
            }
        } finally {
            u.rtos.lock.unlock();
        }
        return l;
    }

    /**
     * {@code dpa:threads}' line: state, EU, activations, triggers latched and ignored, exits, each
     * bound CQ armed or not, the objects it is inside now (C8) and its memory-model findings per check.
     */
    static String thread(DpaUnit u, DpaThread t) {
        String line;
        List<Integer> cqs;
        u.rtos.lock.lock();
        try {
            line = t.describe();
            cqs = List.copyOf(t.boundCqs);
        } finally {
            u.rtos.lock.unlock();
        }
        StringBuilder b = new StringBuilder(line);
        for (int cqn : cqs) { // outside the RTOS lock: nothing calls the NIC under it
            DpaNic.CqState s = u.nic.cqState(cqn);
            b.append(String.format(" cq 0x%x %s", cqn, s == null ? "?" : (s.armed() ? "armed" : "not armed") + " pi "
                    + s.producerIndex() + " ci " + s.consumerIndex()));
        }
        List<String> inside = u.objects.held(t); // C8: the objects its running library call is in
        if (!inside.isEmpty()) {
            b.append(" inside ").append(String.join(",", inside));
        }
        Map<String, Integer> mine = new TreeMap<>(); // its findings by check, as dpa:mm lists them
        for (Finding f : u.findings()) {
            if (f.process() == t.process.id && f.thread() == t.id) {
                mine.merge(f.check(), 1, Integer::sum);
            }
        }
        mine.forEach((check, n) -> b.append(' ').append(check).append(" findings ").append(n));
        return b.toString();
    }

    /**
     * {@code dpaeumgmt}'s EU list: id, partition (the model has one, 0), the groups it is in,
     * state ({@code reserved} for the DPA OS, {@code busy} or {@code free}) and the thread it runs
     * ({@code name#id of process P}), with its activation count.
     */
    static List<String> eus(DpaUnit u) {
        List<String> l = new ArrayList<>();
        u.rtos.lock.lock();
        try {
            Map<Integer, DpaThread> on = new TreeMap<>();
            for (DpaThread t : u.threads().values()) {
                Runner r = t.runner;
                if (r != null && r.eu >= 0) {
                    on.put(r.eu, t);
                }
            }
            ExecutionUnits e = u.eus;
            l.add(String.format("%-4s %-9s %-8s %-8s %-11s %s", "eu", "partition", "groups", "state", "activations", "thread"));
            for (int i = 0; i < e.total; i++) {
                DpaThread t = on.get(i);
                String state = i < e.reserved ? "reserved" : e.isBusy(i) ? "busy" : "free";
                List<Integer> g = e.groupsOf(i);
                l.add(String.format("%-4d %-9d %-8s %-8s %-11d %s", i, 0, g.isEmpty() ? "-" : g.toString().replace(" ", ""), state,
                        e.activations[i], t == null ? "-" : t.name() + " of process " + t.process.id));
            }
        } finally {
            u.rtos.lock.unlock();
        }
        return l;
    }

    /** The memory model's findings grouped by process: check, thread and the handler line of each. */
    static List<String> findings(DpaUnit u) {
        Map<Integer, List<Finding>> by = new TreeMap<>();
        for (Finding f : u.findings()) {
            by.computeIfAbsent(f.process(), k -> new ArrayList<>()).add(f);
        }
        if (by.isEmpty()) {
            return List.of("no memory-model finding (check mode " + u.mm.mode + ")");
        }
        List<String> l = new ArrayList<>();
        by.forEach((p, fs) -> {
            l.add("process " + p + ": " + fs.size() + " finding(s)");
            fs.forEach(f -> l.add("  " + f.check() + " thread " + f.thread() + " at " + f.site() + ": " + f.message()));
        });
        return l;
    }

    /**
     * {@code flexio_err_status_get} and {@code flexio_crash_data} for every process that ended:
     * its status ({@code dpa_process_status} and the error kind), the thread whose error ended it
     * and that handler's line, and the crash text.
     */
    static List<String> crashes(DpaUnit u) {
        List<String> l = new ArrayList<>();
        u.rtos.lock.lock();
        try {
            for (DpaProcess p : u.processes().values()) {
                if (p.status == ProcessStatus.OK) {
                    continue;
                }
                String kind = switch (ProcessStatus.errStatus(p.status)) {
                    case 0 -> "finished";
                    case 1 -> "fatal error";
                    default -> "user error";
                };
                l.add(String.format("process %d uid %d status 0x%02x (%s) thread %s at %s: %s", p.id, p.uid, p.status, kind,
                        p.failedThread < 0 ? "-" : String.valueOf(p.failedThread), p.failedSite.isEmpty() ? "-" : p.failedSite, p.crash));
            }
        } finally {
            u.rtos.lock.unlock();
        }
        return l.isEmpty() ? List.of("no DPA process ended with an error") : l;
    }
}
