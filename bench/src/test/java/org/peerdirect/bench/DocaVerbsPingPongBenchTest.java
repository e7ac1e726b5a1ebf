package org.peerdirect.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The DOCA verbs ping-pong benchmark measures what it says: each invocation sees ROUNDS more round trips, nothing stays. */
class DocaVerbsPingPongBenchTest {

    @Test
    void roundTripsCountAndTheHostComesDownClean() throws Exception {
        DocaVerbsPingPongBench b = new DocaVerbsPingPongBench();
        DocaVerbsPingPongBench.Host h = new DocaVerbsPingPongBench.Host();
        h.up();
        try {
            long first = b.dpaVerbsRoundTrip(h);
            assertTrue(first >= DocaVerbsPingPongBench.ROUNDS, "at least " + DocaVerbsPingPongBench.ROUNDS + " round trips: " + first);
            long second = b.dpaVerbsRoundTrip(h);
            assertTrue(second >= first + DocaVerbsPingPongBench.ROUNDS, first + " then " + second);
            assertTrue(!h.rig.bf3.dpaDescribe().toString().matches("(?s).*\\bC[1-7]\\b.*"), "no memory-model finding: " + h.rig.bf3.dpaDescribe());
        } finally {
            h.down();
        }
        assertEquals(0, h.rig.bf3.devxLive(), "no DevX object left: " + h.rig.bf3.devxDescribe());
        assertEquals(0, h.rig.bf3.pagesHeld(), "every firmware page back");
    }
}
