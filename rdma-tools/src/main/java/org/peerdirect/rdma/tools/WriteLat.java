package org.peerdirect.rdma.tools;

import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/** {@code rdma:write_lat}: perftest's {@code ib_write_lat} ({@code src/write_lat.c}); the test's loop and output are {@link Perftest}'s. */
final class WriteLat {

    static final String DESCRIPTION = "RDMA WRITE latency, as perftest ib_write_lat";

    private final ToolEnv env;

    WriteLat(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) {
        return new Perftest(env, PerftestParameters.lat("write_lat", "RDMA_Write Latency Test", IbvWrOpcode.RDMA_WRITE, args)).run();
    }
}
