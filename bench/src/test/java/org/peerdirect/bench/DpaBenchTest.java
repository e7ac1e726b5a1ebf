package org.peerdirect.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

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

    /** The checker figure's RPC stores and writes back under the chosen mode; the wake samples and EU counters move. */
    @Test
    void theStoresRpcRunsInTheChosenModeAndTheFiguresMove() throws Exception {
        DpaBench b = new DpaBench();
        DpaBench.Checked c = new DpaBench.Checked();
        c.check = "off";
        c.up();
        try {
            assertEquals(0, b.checked0(c));
            assertEquals(1000, b.checked1k(c));
            assertEquals(967, java.nio.ByteBuffer.wrap(c.process.dev2hostMemcpy(c.block + 7 * 8, 8))
                    .order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong(), "the last store of slot 7 (i = 967) landed");
            String f = c.host.figures();
            assertTrue(f.matches("(?s)# dpa wake \\(CQE written -> handler entry\\): p50 [1-9][0-9]* ns, p99 [1-9][0-9]* ns.*"), f);
            assertTrue(f.matches("(?s).*# dpa cycles: [12] activations, [0-9.]+ virtual cycles.*"), "one or two: a handler may take the second call's CQE before it reschedules: " + f);
            assertThrows(IllegalStateException.class, () -> c.host.bf3.dpaCheckMode("strict"), "not once the DPA runs");
            assertEquals(1000, b.objects1k(c), "C8's annotations with the checker off");
        } finally {
            c.down();
        }
    }

    /** C8's figure: one hart entering and leaving one object 1000 times is checked and silent. */
    @Test
    void theObjectsRpcIsSilentInStrictMode() throws Exception {
        DpaBench b = new DpaBench();
        DpaBench.Checked c = new DpaBench.Checked();
        c.check = "strict";
        c.up();
        try {
            assertEquals(1000, b.objects1k(c));
            assertEquals(List.of("no memory-model finding (check mode STRICT)"), c.host.bf3.dpaFindings());
        } finally {
            c.down();
        }
    }
}
