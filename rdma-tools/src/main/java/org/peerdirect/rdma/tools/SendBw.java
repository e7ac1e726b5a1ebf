package org.peerdirect.rdma.tools;

import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/** {@code rdma:send_bw}: perftest's {@code ib_send_bw} ({@code src/send_bw.c}); the test's loop and output are {@link Perftest}'s. */
final class SendBw {

    static final String DESCRIPTION = "SEND bandwidth, as perftest ib_send_bw. Example: rdma:send_bw -a";

    private final ToolEnv env;

    SendBw(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) {
        return new Perftest(env, PerftestParameters.bw("send_bw", "Send BW Test", IbvWrOpcode.SEND, args)).run();
    }
}
