package org.peerdirect.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The DOCA ping-pong benchmark (the sample's program run free) measures what it says: each invocation sees ROUNDS more round trips, nothing stays. */
class DocaPingPongBenchTest {

    @Test
    void roundTripsCountAndTheHostComesDownClean() throws Exception {
        DocaPingPongBench b = new DocaPingPongBench();
        DocaPingPongBench.Host h = new DocaPingPongBench.Host();
        h.elidePolls = true;
        h.up();
        try {
            long first = b.dpaRoundTrip(h);
            assertTrue(first >= DocaPingPongBench.ROUNDS, "at least " + DocaPingPongBench.ROUNDS + " round trips: " + first);
            long second = b.dpaRoundTrip(h);
            assertTrue(second >= first + DocaPingPongBench.ROUNDS, first + " then " + second);
            assertTrue(!h.rig.bf3.dpaDescribe().toString().matches("(?s).*\\bC[1-7]\\b.*"), "no memory-model finding: " + h.rig.bf3.dpaDescribe());
        } finally {
            h.down();
        }
        assertEquals(0, h.rig.bf3.devxLive(), "no DevX object left: " + h.rig.bf3.devxDescribe());
        assertEquals(0, h.rig.bf3.pagesHeld(), "every firmware page back");
    }
}
