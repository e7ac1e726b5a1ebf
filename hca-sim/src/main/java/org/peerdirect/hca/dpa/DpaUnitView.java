package org.peerdirect.hca.dpa;

import java.util.ArrayList;
import java.util.List;

import org.peerdirect.hca.dpaview.DpaView;

/**
 * {@link DpaView.Dpa} of a {@link DpaUnit}: the same state {@link DpaUnit#describe()} prints for
 * {@code dpa:ps}, as values. The EUs, processes and threads are read in one hold of the RTOS lock
 * (one consistent picture); each bound CQ's state is asked of the NIC after it is released, as
 * {@link DpaUnit#describeThread} does (the NIC's CQ state has its own lock, never taken inside the
 * RTOS's).
 */
public final class DpaUnitView {

    private DpaUnitView() {
    }

    /** The DPA of {@code bdf} as {@code unit} holds it now; a function without a unit yet is "not running". */
    public static DpaView.Dpa read(String bdf, DpaUnit unit) {
        if (unit == null) {
            return new DpaView.Dpa(bdf, false, 0, 0, 0, List.of(), List.of(), List.of());
        }
        List<DpaView.Eu> eus = new ArrayList<>();
        List<DpaView.Process> processes = new ArrayList<>();
        List<DpaThread> threads = new ArrayList<>();
        List<List<Integer>> bound = new ArrayList<>();
        List<long[]> counts = new ArrayList<>();
        List<String> states = new ArrayList<>();
        int total;
        int reserved;
        int busy;
        unit.rtos.lock.lock();
        try {
            ExecutionUnits e = unit.eus;
            total = e.total;
            reserved = e.reserved;
            busy = e.busyCount();
            for (int i = 0; i < e.total; i++) {
                if (e.activations[i] > 0) {
                    eus.add(new DpaView.Eu(i, e.isBusy(i), e.activations[i], e.cycles[i], e.instRet[i]));
                }
            }
            for (DpaProcess p : unit.processList()) {
                processes.add(new DpaView.Process(p.id, p.uid, p.pd, p.status, p.heap.base(), p.heap.size(), p.threads.size(), p.crash));
                for (DpaThread t : p.threads.values()) {
                    threads.add(t);
                    bound.add(List.copyOf(t.boundCqs));
                    counts.add(new long[] {t.runner == null ? -1 : t.runner.eu, t.activations, t.triggersLatched, t.triggersIgnored});
                    states.add(t.state.name());
                }
            }
        } finally {
            unit.rtos.lock.unlock();
        }
        List<DpaView.Thread> out = new ArrayList<>();
        for (int i = 0; i < threads.size(); i++) {
            DpaThread t = threads.get(i);
            List<DpaView.Cq> cqs = new ArrayList<>();
            for (int cqn : bound.get(i)) {
                DpaNic.CqState s = unit.nic.cqState(cqn);
                cqs.add(s == null ? new DpaView.Cq(cqn, false, false, 0, 0)
                        : new DpaView.Cq(cqn, true, s.armed(), s.producerIndex(), s.consumerIndex()));
            }
            long[] c = counts.get(i);
            out.add(new DpaView.Thread(t.id, t.process.id, t.entry.name(), states.get(i), (int) c[0], c[1], c[2], c[3], List.copyOf(cqs)));
        }
        return new DpaView.Dpa(bdf, true, total, reserved, busy, List.copyOf(eus), List.copyOf(processes), List.copyOf(out));
    }
}
