package org.peerdirect.rdma.tools;

import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/** {@code rdma:write_bw}: perftest's {@code ib_write_bw} ({@code src/write_bw.c}); the test's loop and output are {@link Perftest}'s. */
final class WriteBw {

    static final String DESCRIPTION = "RDMA WRITE bandwidth, as perftest ib_write_bw. Example: rdma:write_bw -s 64K -q 4";

    private final ToolEnv env;

    WriteBw(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) {
        return new Perftest(env, PerftestParameters.bw("write_bw", "RDMA_Write BW Test", IbvWrOpcode.RDMA_WRITE, args)).run();
    }
}
