package org.peerdirect.rdma.tools;

/**
 * {@code rdma:atomic_bw}: perftest's {@code ib_atomic_bw} ({@code src/atomic_bw.c}): 8-byte atomics
 * on one remote word ({@code -A FETCH_AND_ADD|CMP_AND_SWAP}, and the IBA 1.5 ATOMIC_WRITE perftest
 * does not have); after the run, the word is checked. The loop and output are {@link Perftest}'s.
 */
final class AtomicBw {

    static final String DESCRIPTION = "8-byte atomics on one remote word, as perftest ib_atomic_bw (-A FETCH_AND_ADD|CMP_AND_SWAP, "
            + "or IBA 1.5 ATOMIC_WRITE). Example: rdma:atomic_bw -d mlx5_1 -A ATOMIC_WRITE --odp";

    private final ToolEnv env;

    AtomicBw(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) {
        return new Perftest(env, PerftestParameters.atomic("Atomic BW Test", args)).run();
    }
}
