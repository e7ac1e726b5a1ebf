package org.peerdirect.bench.dpa;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The DPA side of {@link org.peerdirect.bench.DocaDpaBench}: an empty kernel (a launch measures
 * DOCA's launch path, not work), and a persistent worker that, each time it is notified, does a
 * fixed amount of ISA work on its local storage, adds 1 to a sync event and reschedules.
 * Built into {@code META-INF/dpa/bench_doca_dpa.dpaimg} by dpacc with doca-dpa-dev linked.
 */
@DpaApp("bench_doca_dpa")
public final class DocaBenchDev {

    /** ISA loads and stores one activation of {@link #worker} does. */
    public static final int WORK = 64;

    private DocaBenchDev() {
    }

    /** A kernel rank that does nothing. */
    @DpaGlobal
    static void empty(long unused) {
        Dpa.compilerBarrier();
    }

    /** One activation: {@link #WORK} ISA operations on the thread's local storage, the event's add, reschedule. */
    @DpaGlobal
    static void worker(long eventHandle) {
        long ls = DocaDpaDev.threadGetLocalStorage();
        for (int i = 0; i < WORK / 2; i++) {
            Dpa.st64(ls, Dpa.ld64(ls) + 1);
        }
        DocaDpaDevSyncEvent.updateAdd(eventHandle, 1);
        DocaDpaDev.threadReschedule();
    }

    /** Notifies the {@code n} notification completions whose handles are at {@code handles}. */
    @DpaRpc
    static long notifyAll(long handles, int n) {
        for (int i = 0; i < n; i++) {
            DocaDpaDev.threadNotify(Dpa.ld64(handles + 8L * i));
        }
        return n;
    }
}
