package org.peerdirect.hca.cx3.fw;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link ConnectX3Device#close} (the function's removal) by a thread whose interrupt flag is set
 * (an earlier interruption nobody cleared): as the ConnectX-4's close, it still waits, bounded, for
 * the firmware thread to end, and hands the interruption back afterwards. Before, its join threw
 * at once and the close returned with the firmware thread still running.
 */
class ConnectX3CloseTest {

    @TempDir
    Path tmp;

    @Test
    void aCloseByAnInterruptedThreadStillWaitsForTheFirmwareThreadAndKeepsTheInterrupt() throws Exception {
        HcrHarness h = new HcrHarness(tmp);
        h.bringUp(0); // the firmware thread idle in its doorbell wait: its end needs the interrupt's wake-up
        Thread firmware = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("fw-" + h.fn.bdf()))
                .findFirst().orElse(null);
        assertNotNull(firmware, "the firmware thread");
        boolean[] atClose = new boolean[2];
        h.fn.addRemovalListener(() -> { // runs right after the device's own (registered at power-on): what its close left
            atClose[0] = firmware.isAlive();
            atClose[1] = Thread.currentThread().isInterrupted();
        });
        Thread.currentThread().interrupt();
        try {
            h.close(); // pages back, then the bus closes: the function's removal closes the device on this thread; the audit
        } finally {
            Thread.interrupted();
            firmware.join(10_000);
        }
        assertFalse(atClose[0], "the firmware thread ended before the close returned");
        assertTrue(atClose[1], "the caller's interruption is handed back after the close");
    }
}
