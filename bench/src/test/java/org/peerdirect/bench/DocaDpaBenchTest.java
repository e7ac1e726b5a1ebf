package org.peerdirect.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The DOCA DPA benchmark measures what it says: launches complete one by one, every worker runs per fan-out, nothing stays. */
class DocaDpaBenchTest {

    @Test
    void launchesCompleteActivationsCountAndTheHostComesDownClean() throws Exception {
        DocaDpaBench b = new DocaDpaBench();
        DocaDpaBench.Host h = new DocaDpaBench.Host();
        h.up();
        try {
            assertEquals(1, b.launchOneRank(h));
            assertEquals(2, b.launchOneRank(h));
            assertEquals(2, h.launched.get(), "each launch's completion added 1");
            assertEquals(DocaDpaBench.WORKERS, b.activations(h));
            assertEquals(2L * DocaDpaBench.WORKERS, b.activations(h));
            assertEquals(2L * DocaDpaBench.WORKERS, h.activated.get(), "every worker ran once per fan-out");
            for (org.peerdirect.doca.dpa.DocaDpaThread t : h.workers) {
                assertEquals(2, t.activations(), t.toString());
            }
        } finally {
            h.down();
        }
        assertEquals(0, h.rig.bf3.devxLive(), "no DevX object left: " + h.rig.bf3.devxDescribe());
        assertEquals(0, h.rig.bf3.pagesHeld(), "every firmware page back");

        DocaDpaBench.Ring r = new DocaDpaBench.Ring();
        r.up();
        assertEquals(0, b.ringHandOff(r));
        assertEquals(1, b.ringHandOff(r));
        r.down();
    }
}
