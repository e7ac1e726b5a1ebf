package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvContext;

/** {@code flexio_query_prm_hca_caps}: the BlueField-3's DPA block, read over DevX's general command, as {@code dpa:caps} shows it. */
class FlexioHcaCapsTest {

    @TempDir
    Path tmp;

    @Test
    void theBlueField3ReportsItsDpa() {
        FlexioMachine m = new FlexioMachine(tmp);
        try (IbvContext ctx = m.open()) {
            FlexioHcaCaps c = FlexioHcaCaps.query(ctx);
            var shown = m.bf3.dpaCapValues();
            assertTrue(c.dpa());
            assertEquals(1 << shown.get("log_max_harts_per_partition"), c.harts());
            assertEquals(1 << shown.get("log_harts_per_core"), c.hartsPerCore());
            assertEquals(shown.get("os_reserved_harts").intValue(), c.osReservedHarts());
            assertEquals(shown.get("kernel_max_run_time").intValue(), c.kernelMaxRunTime());
            assertEquals(1 << shown.get("log_max_dpa_threads_per_process"), c.maxThreadsPerProcess());
            assertEquals(shown.get("max_num_dpa_thread_per_group").intValue(), c.maxThreadsPerGroup());
            assertTrue(c.singleHartAffinity() && c.hartGroupAffinity());
        } finally {
            m.close();
        }
    }
}
