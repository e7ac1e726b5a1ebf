package org.peerdirect.bench.dpa;

import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaRpc;

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
}
