package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.hca.dpaview.DpaView;

/** The console's view of a DPA tells what {@code dpa:ps} and {@code dpa:threads} print, as values. */
class DpaUnitViewTest extends DpaRig {

    @Test
    void aDpaWithoutAUnitIsNotRunning() {
        DpaView.Dpa d = DpaUnitView.read("0000:09:00.0", null);
        assertFalse(d.running());
        assertEquals(List.of(), d.processes());
    }

    @Test
    void theViewShowsWhatDescribePrints() throws Exception {
        start(DpaConfig.test(4, 1));
        int pid = load(UID, RtosTest.image(), 1 << 16);
        long heap = unit.heapBase(pid);
        int t = unit.threadCreate(pid, "count", heap, 0, Affinity.ANY, false);
        unit.threadRun(t);
        for (int i = 0; i < 3; i++) {
            assertTrue(unit.trigger(t));
            settle();
        }
        nic.threadCq(0x41, UID, t);
        DpaView.Dpa d = DpaUnitView.read("0000:09:00.0", unit);
        assertTrue(d.running());
        assertEquals(4, d.eusTotal());
        assertEquals(2, d.eusReserved());
        assertEquals(0, d.eusBusy());
        assertEquals(List.of(new DpaView.Eu(2, false, 3, d.eus().get(0).cycles(), d.eus().get(0).instret())), d.eus(),
                "one EU ran the three activations: " + unit.describe());
        assertTrue(d.eus().get(0).instret() > 0, "it retired instructions");
        assertEquals(1, d.processes().size());
        DpaView.Process p = d.processes().get(0);
        assertEquals(List.of(pid, UID, 0, 1), List.of(p.id(), p.uid(), p.status(), p.threads()));
        assertEquals(heap, p.heapBase());
        DpaView.Thread th = d.threads().get(0);
        assertEquals(List.of(t, pid, "count", "WAITING", -1), List.of(th.id(), th.process(), th.entry(), th.state(), th.eu()));
        assertEquals(List.of(3L, 0L, 0L), List.of(th.activations(), th.triggersLatched(), th.triggersIgnored()),
                "as dpa:threads says: " + unit.describeThread(t));
        assertEquals(List.of(new DpaView.Cq(0x41, true, false, 0, 0)), th.cqs(), "the bound CQ, not armed");
        unit.threadDestroy(t);
        unit.processDestroy(pid);
        assertEquals(List.of(), DpaUnitView.read("0000:09:00.0", unit).processes(), "a destroyed process is gone from the view");
    }
}
