package org.peerdirect.dpa.samples.dev;

import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.flexio.dev.FlexioDev;

/**
 * Device code of {@code dpa:sample rpc}, FlexIO's RPC sample ({@code flexio_rpc}, DPA_MODEL.md §4
 * scenario 1): {@code __dpa_rpc__} entries the host calls with {@code flexio_process_call}. dpacc
 * generates {@code RpcDevStubs} (host) and the trampolines that unpack the argument buffer, and
 * links this class with flexio-dev into {@code META-INF/dpa/dpa_sample_rpc.dpaimg}.
 */
@DpaApp("dpa_sample_rpc")
public final class RpcDev {

    private RpcDev() {
    }

    /** {@code __dpa_rpc__ uint64_t rpc_calculate(uint64_t a, uint64_t b)}: their sum. */
    @DpaRpc("rpc_calculate")
    static long calculate(long a, long b) {
        return a + b;
    }

    /** {@code __dpa_rpc__ rpc_fail(code)}: {@code flexio_dev_error(code)}, a user error (0x80..0xff) the host sees; never returns. */
    @DpaRpc("rpc_fail")
    static long fail(int code) {
        FlexioDev.error(code);
        return 0;
    }
}
