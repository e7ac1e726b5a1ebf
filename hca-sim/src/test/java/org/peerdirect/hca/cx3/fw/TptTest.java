package org.peerdirect.hca.cx3.fw;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import org.junit.jupiter.api.Test;

/** The MTT as the engine walks it: runs of following bus addresses are one block, nothing else merges. */
class TptTest {

    @Test
    void followingMttEntriesMakeOneBlockAndGapsStartNewOnes() {
        long[][] b = Tpt.coalesce(new long[] {0x10000, 0x11000, 0x12000, 0x40000, 0x3f000, 0x40000, 0x41000});
        assertArrayEquals(new long[] {0x10000, 0x40000, 0x3f000}, b[0], "starts: a run, a lone page, a run that goes on past it");
        assertArrayEquals(new long[] {0x3000, 0x1000, 0x3000}, b[1]);
        long[][] one = Tpt.coalesce(new long[] {0x5000});
        assertArrayEquals(new long[] {0x5000}, one[0]);
        assertArrayEquals(new long[] {0x1000}, one[1]);
    }
}
