package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/** A recording holds one DPA activation event per activation, with its thread, entry, EU, exit and cycles. */
class DpaEventsTest extends DpaRig {

    @TempDir
    Path tmp;

    @Test
    void eachActivationIsOneEvent() throws Exception {
        start(DpaConfig.test(4, 1));
        int pid = load(UID, RtosTest.image(), 1 << 16);
        int t = unit.threadCreate(pid, "count", unit.heapBase(pid), 0, Affinity.ANY, false);
        unit.threadRun(t);
        assertTrue(unit.trigger(t));
        settle(); // not recorded: before the recording starts
        Path file = tmp.resolve("dpa.jfr");
        try (Recording r = new Recording()) {
            r.enable("org.peerdirect.DpaActivation");
            r.start();
            for (int i = 0; i < 3; i++) {
                assertTrue(unit.trigger(t));
                settle();
            }
            r.stop();
            r.dump(file);
        }
        List<RecordedEvent> es = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getEventType().getName().equals("org.peerdirect.DpaActivation")).toList();
        assertEquals(3, es.size(), "one event per activation: " + es);
        for (RecordedEvent e : es) {
            assertEquals(pid, e.getInt("process"));
            assertEquals(t, e.getInt("thread"));
            assertEquals("count", e.getString("entry"));
            assertEquals(2, e.getInt("eu"), "the first EU after the RTOS's reserved two");
            assertEquals("RESCHEDULE", e.getString("exit"));
            assertTrue(e.getLong("cycles") > 0, "cycles charged: " + e);
        }
        unit.threadDestroy(t);
        unit.processDestroy(pid);
    }
}
