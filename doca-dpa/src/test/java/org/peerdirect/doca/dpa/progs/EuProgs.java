package org.peerdirect.doca.dpa.progs;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * doca-dpa's test app: thread group members, counting kernel ranks, a notifying RPC and a load,
 * built by dpacc with doca-dpa-dev. (The EU qualification kernels, DOCA's {@code dpa_nvqual}, are
 * dpa-samples' {@code NvqualDev}, and the memory-model litmus kernels its {@code LitmusDev}, each
 * beside its test and run by itest too.)
 */
@DpaApp("doca_dpa_eu")
public final class EuProgs {

    private EuProgs() {
    }

    /** Notifies the {@code n} threads whose notification handles are at {@code handles} (as {@code dpa_nvqual_entry_point}). */
    @DpaRpc
    static long entryPoint(long handles, int n) {
        for (int i = 0; i < n; i++) {
            DocaDpaDev.threadNotify(Dpa.ld64(handles + 8L * i));
        }
        return 0;
    }

    /** A thread group member: its rank and the group's size into its local storage's two words, then the event's add. */
    @DpaGlobal
    static void groupMember(long eventHandle) {
        long ls = DocaDpaDev.threadGetLocalStorage();
        Dpa.st64(ls, DocaDpaDev.threadRank());
        Dpa.st64(ls + 8, DocaDpaDev.numThreads());
        DocaDpaDevSyncEvent.updateAdd(eventHandle, 1);
        DocaDpaDev.threadFinish();
    }

    /** A kernel rank that counts itself at {@code counter}. */
    @DpaGlobal
    static void count(long counter) {
        Dpa.amoAdd64(counter, 1);
    }

    /** Reads a word of DPA memory as the DPA sees it. */
    @DpaRpc
    static long load64(long daddr) {
        return Dpa.ld64(daddr);
    }
}
