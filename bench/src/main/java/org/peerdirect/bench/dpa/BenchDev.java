package org.peerdirect.bench.dpa;

import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The DPA side of {@link org.peerdirect.bench.DpaBench}: an RPC as small as one can be, so the
 * round trip measures FlexIO's call path (argument buffer, trigger, activation, result), not work.
 * Built into {@code META-INF/dpa/bench_dpa.dpaimg} by dpacc at {@code process-classes}.
 */
@DpaApp("bench_dpa")
public final class BenchDev {

    private BenchDev() {
    }

    /** {@code __dpa_rpc__ uint64_t add(uint64_t a, uint64_t b)}. */
    @DpaRpc
    static long add(long a, long b) {
        return a + b;
    }

    /**
     * {@code __dpa_rpc__ uint64_t stores(uint64_t n, uint64_t daddr)}: {@code n} times a 64-bit
     * store into a 512-byte heap block at {@code daddr} followed by
     * {@code __dpa_thread_memory_writeback}: the memory-model checker's cost per store and
     * write-back, in whichever mode the DPA runs.
     */
    @DpaRpc
    static long stores(long n, long daddr) {
        for (long i = 0; i < n; i++) {
            Dpa.st64(daddr + (i & 63) * 8, i);
            Dpa.memoryWriteback();
        }
        return n;
    }

    /**
     * {@code n} times a device library's call on the object at {@code daddr} as the C8 checker
     * sees it ({@code Dpa.objectEnter} then {@code objectLeave}, nothing between): the check's
     * cost per call, in whichever mode the DPA runs (off: a field check).
     */
    @DpaRpc
    static long objects(long n, long daddr) {
        for (long i = 0; i < n; i++) {
            Dpa.objectEnter(daddr);
            Dpa.objectLeave(daddr);
        }
        return n;
    }
}
