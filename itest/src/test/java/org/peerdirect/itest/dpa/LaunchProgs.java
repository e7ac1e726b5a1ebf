package org.peerdirect.itest.dpa;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * DocaDpaIT's DPA application: DOCA's {@code dpa_kernel_launch} sample's {@code hello_world}
 * (each rank writes {@code num_threads * 1000 + rank + 1} at {@code record + 16 + 8 * rank}, then
 * counts itself at {@code record}) and a load RPC for the host to read results.
 */
@DpaApp("itest_doca_dpa")
public final class LaunchProgs {

    private LaunchProgs() {
    }

    @DpaGlobal
    static void helloWorld(long record) {
        int rank = DocaDpaDev.threadRank();
        Dpa.st64(record + 16 + 8L * rank, DocaDpaDev.numThreads() * 1000L + rank + 1);
        Dpa.memoryFence(Dpa.W, Dpa.W);
        Dpa.amoAdd64(record, 1);
    }

    @DpaRpc
    static long load64(long daddr) {
        return Dpa.ld64(daddr);
    }
}
