package org.peerdirect.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.function.LongSupplier;
import java.util.function.Supplier;

import org.junit.jupiter.api.Test;

/**
 * The DPA ping-pong benchmarks measure what they say: each invocation sees ROUNDS more round trips
 * of the free-running exchange, no memory-model finding, nothing stays. DOCA RDMA with the sample's
 * program run free ({@link DocaPingPongBench}), and DOCA verbs QPs ({@link DocaVerbsPingPongBench}).
 */
class DocaPingPongBenchTest {

    @Test
    void rdmaRoundTripsCountAndTheHostComesDownClean() throws Exception {
        DocaPingPongBench b = new DocaPingPongBench();
        DocaPingPongBench.Host h = new DocaPingPongBench.Host();
        h.elidePolls = true;
        h.up();
        check(() -> h.rig, () -> b.dpaRoundTrip(h), h::down);
    }

    @Test
    void verbsRoundTripsCountAndTheHostComesDownClean() throws Exception {
        DocaVerbsPingPongBench b = new DocaVerbsPingPongBench();
        DocaVerbsPingPongBench.Host h = new DocaVerbsPingPongBench.Host();
        h.up();
        check(() -> h.rig, () -> b.dpaVerbsRoundTrip(h), h::down);
    }

    /** Two invocations of {@code invocation} on the set-up host, then {@code down}: the counts, the DPA's findings, what is left. */
    private static void check(Supplier<DocaRig> rig, LongSupplier invocation, Runnable down) {
        try {
            long first = invocation.getAsLong();
            assertTrue(first >= DocaPingPongBench.ROUNDS, "at least " + DocaPingPongBench.ROUNDS + " round trips: " + first);
            long second = invocation.getAsLong();
            assertTrue(second >= first + DocaPingPongBench.ROUNDS, first + " then " + second);
            String dpa = rig.get().bf3.dpaDescribe().toString();
            assertTrue(!dpa.matches("(?s).*\\bC[1-7]\\b.*"), "no memory-model finding: " + dpa);
        } finally {
            down.run();
        }
        assertEquals(0, rig.get().bf3.devxLive(), "no DevX object left: " + rig.get().bf3.devxDescribe());
        assertEquals(0, rig.get().bf3.pagesHeld(), "every firmware page back");
    }
}
