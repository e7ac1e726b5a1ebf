package org.peerdirect.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The DPA benchmark measures what it says: its RPC adds, its copy lands in the heap, nothing stays. */
class DpaBenchTest {

    @Test
    void theRpcAddsTheCopyLandsAndTheHostComesDownClean() throws Exception {
        DpaBench b = new DpaBench();
        DpaBench.Host h = new DpaBench.Host();
        h.up();
        try {
            h.a = 41;
            assertEquals(42, b.processCall(h), "flexio_process_call of add(41, 1)");
            byte[] pattern = new byte[DpaBench.COPY];
            for (int i = 0; i < pattern.length; i++) {
                pattern[i] = (byte) (i * 7 + 3);
            }
            h.proc.write(h.haddr, pattern, 0, pattern.length);
            b.host2devMemcpy64k(h);
            assertArrayEquals(pattern, h.process.dev2hostMemcpy(h.daddr, DpaBench.COPY), "64 KiB in the DPA heap");
        } finally {
            h.down();
        }
        assertEquals(0, h.bf3.devxLive(), "no DevX object left: " + h.bf3.devxDescribe());
        assertEquals(0, h.bf3.pagesHeld(), "every firmware page back");
    }
}
