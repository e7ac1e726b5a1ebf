package org.peerdirect.rdma.tools;

import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/** {@code rdma:read_bw}: perftest's {@code ib_read_bw} ({@code src/read_bw.c}); the test's loop and output are {@link Perftest}'s. */
final class ReadBw {

    static final String DESCRIPTION = "RDMA READ bandwidth, as perftest ib_read_bw";

    private final ToolEnv env;

    ReadBw(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) {
        return new Perftest(env, PerftestParameters.bw("read_bw", "RDMA_Read BW Test", IbvWrOpcode.RDMA_READ, args)).run();
    }
}
