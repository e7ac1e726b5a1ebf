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

/**
 * A recording holds one DPA activation event per activation, with its thread, entry, EU, exit and
 * cycles; and the wake-up chain's hops: a trigger's way to the handler ({@code DpaWake}), an elided
 * poll's wait ended by the NIC's write ({@code DpaPollWait}).
 */
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
        List<RecordedEvent> es = recordTriggers(t, "org.peerdirect.DpaActivation");
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

    private List<RecordedEvent> recorded(Path file, String type) throws Exception {
        return RecordingFile.readAllEvents(file).stream().filter(e -> e.getEventType().getName().equals(type)).toList();
    }

    /** The {@code type} events of a recording over three triggers of thread {@code t}, each settled. */
    private List<RecordedEvent> recordTriggers(int t, String type) throws Exception {
        Path file = tmp.resolve(type + ".jfr");
        try (Recording r = new Recording()) {
            r.enable(type);
            r.start();
            for (int i = 0; i < 3; i++) {
                assertTrue(unit.trigger(t));
                settle();
            }
            r.stop();
            r.dump(file);
        }
        return recorded(file, type);
    }

    @Test
    void aTriggersWayToTheHandlerIsOneWakeEventPerActivationWithItsHops() throws Exception {
        start(DpaConfig.test(4, 2).concurrent());
        int pid = load(UID, RtosTest.image(), 1 << 16);
        int t = unit.threadCreate(pid, "count", unit.heapBase(pid), 0, Affinity.ANY, false);
        unit.threadRun(t);
        List<RecordedEvent> es = recordTriggers(t, "org.peerdirect.DpaWake");
        assertEquals(3, es.size(), "one per triggered activation: " + es);
        for (RecordedEvent e : es) {
            assertEquals(t, e.getInt("thread"));
            assertEquals("start", e.getString("how"));
            for (String hop : List.of("queued", "mount", "carrier", "entry")) {
                assertTrue(e.getLong(hop) >= 0, hop + " stamped in order: " + e);
            }
        }
        unit.threadDestroy(t);
        unit.processDestroy(pid);
    }

    @Test
    void aPollWaitEndedByTheNicsWriteIsOneEventWithItsSignal() throws Exception {
        start(DpaConfig.test(4, 3).concurrent().withWatchdog(Long.MAX_VALUE));
        int pid = load(UID, RtosTest.image(), 1 << 16);
        long heap = unit.heapBase(pid);
        int t = unit.threadCreate(pid, "spin", heap, 0, Affinity.ANY, false);
        unit.threadRun(t);
        Path file = tmp.resolve("poll.jfr");
        try (Recording r = new Recording()) {
            r.enable("org.peerdirect.DpaPollWait");
            r.start();
            assertTrue(unit.trigger(t));
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (unit.mm.polls.waiting() == 0) { // the hart waits (its polls saw nothing written)
                assertTrue(System.nanoTime() < deadline, "the poller waits");
                Thread.onSpinWait();
            }
            unit.nicWrite(heap, java.lang.foreign.MemorySegment.ofArray(new long[] {1}), 0, 8);
            settle();
            r.stop();
            r.dump(file);
        }
        assertEquals(1, peek(heap + 8), "the hart saw the write and went on");
        List<RecordedEvent> woken = recorded(file, "org.peerdirect.DpaPollWait").stream()
                .filter(e -> e.getString("outcome").equals("WOKEN")).toList();
        assertTrue(!woken.isEmpty(), "the wait the NIC's write ended: " + recorded(file, "org.peerdirect.DpaPollWait"));
        RecordedEvent e = woken.getLast();
        assertEquals(t, e.getInt("thread"));
        assertTrue(e.getLong("unchanged") > 0 && e.getLong("wake") > 0 && e.getLong("carrier") >= 0, "hops in order, the signal stamped: " + e);
        unit.processDestroy(pid);
    }
}
