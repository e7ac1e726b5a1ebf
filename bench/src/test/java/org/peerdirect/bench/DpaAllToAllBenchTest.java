package org.peerdirect.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/**
 * The all-to-all benchmark measures what it says: setup checks one exact transpose of each kind
 * (it throws otherwise), later all-to-alls complete (the DPA ranks' completion events reach each
 * sequence number, the host ranks' flags do), and the machine comes down with nothing left.
 */
class DpaAllToAllBenchTest {

    @Test
    void bothAllToAllsCompleteAndTheMachineComesDownClean() throws Exception {
        DpaAllToAllBench b = new DpaAllToAllBench();
        DpaAllToAllBench.World w = new DpaAllToAllBench.World();
        w.up();
        try {
            assertEquals(2, b.dpaAllToAll(w));
            assertEquals(3, b.dpaAllToAll(w));
            for (DpaAllToAllBench.DpaRank r : w.dpaRanks) {
                assertEquals(3, r.done.get(), "rank " + r.me + "'s completion event set to the last sequence number");
            }
            assertEquals(2, b.hostAllToAll(w));
            assertEquals(3, b.hostAllToAll(w));
            w.checkTranspose("dpa", r -> w.dpaRanks.get(r).dpa.d2hMemcpy(w.dpaRanks.get(r).recv, DpaAllToAllBench.RANKS * DpaAllToAllBench.BLOCK));
        } finally {
            w.down();
        }
        for (org.peerdirect.hca.cx4.ConnectX4Device m : w.bf3) {
            assertEquals(0, m.devxLive(), "no DevX object left: " + m.devxDescribe());
            assertEquals(0, m.pagesHeld(), "every firmware page back");
        }
    }
}
