package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.peerdirect.doca.dpa.progs.KernelProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * {@link DocaDpaObjects} (what {@code dpa:doca} prints): a context from create to destroy with its
 * state and FlexIO process, the sync events on it with their values, its threads with their
 * notification completions, and its kernel launches counted as they wait, run and finish. The
 * machine's close checks nothing is left.
 */
class DocaDpaObjectsTest extends DpaLabFixture {

    private static final Duration BOUND = Duration.ofSeconds(60);

    private final DocaDpaObjects objects = new DocaDpaRegistry();

    DocaDpaObjectsTest() {
        super(null);
    }

    @AfterEach
    void down() {
        assertEquals(List.of(), mine(), "no context of the test's process left listed"); // before the fixture closes the lab
    }

    /** The contexts of the lab's process (other tests' JVM-wide contexts are not ours). */
    private List<DocaDpaObjects.Context> mine() {
        return objects.contexts().stream().filter(c -> c.pid() == lab.proc.pid()).toList();
    }

    private DocaDpaObjects.Context only() {
        List<DocaDpaObjects.Context> l = mine();
        assertEquals(1, l.size(), "one context: " + l);
        return l.get(0);
    }

    @Test
    void aContextIsListedFromCreateToDestroyWithItsStateAndFlexioProcess() {
        DocaDpa d = DocaDpa.create(dev);
        DocaDpaObjects.Context c = only();
        assertEquals(List.of("created", "-", -1, "mlx5_0", "doca-dpa-host"), List.of(c.state(), c.app(), c.flexioProcess(), c.device(), c.process()));
        d.setApp(KernelProgsStubs.APP);
        d.start();
        c = only();
        assertEquals("started", c.state());
        assertEquals("doca_dpa_kernels", c.app());
        int id = c.flexioProcess();
        assertTrue(lab.dpa().stream().anyMatch(l -> l.contains("process " + id)), "dpa:ps shows FlexIO process " + id + ": " + lab.dpa());
        d.stop();
        assertEquals(List.of("stopped", -1), List.of(only().state(), only().flexioProcess()));
        d.destroy();
        assertEquals(List.of(), mine(), "destroyed: gone");
    }

    @Test
    void eventsKernelsAndThreadsAsTheyChange() {
        DocaDpa d = DocaDpa.create(dev);
        d.setApp(KernelProgsStubs.APP);
        d.start();
        DocaSyncEvent wait = DocaSyncEvent.create(); // the kernel_launch sample's: CPU → DPA
        wait.addPublisherLocationCpu(dev);
        wait.addSubscriberLocationDpa(d);
        wait.start();
        DocaSyncEvent comp = DocaSyncEvent.create(); // DPA → CPU
        comp.addPublisherLocationDpa(d);
        comp.addSubscriberLocationCpu(dev);
        comp.start();
        assertEquals(List.of("0", "0"), only().events().stream().map(DocaDpaObjects.Event::value).toList(), "both listed, both 0");

        long rec = d.memAlloc(1024);
        d.memset(rec, 0, 1024);
        d.kernelLaunchUpdateSet(wait, 4, comp, 10, 2, KernelProgsStubs.HELLO_WORLD, rec);
        DocaDpaObjects.Kernels k = only().kernels();
        assertEquals(List.of(1L, 0L, 0L, 1), List.of(k.launched(), k.started(), k.finished(), k.pending()), "waiting: " + k);
        assertEquals("helloWorld x2, wait event " + wait.id() + " passes 4, completion event " + comp.id() + " set 10", k.lastLaunched());
        assertEquals("-", k.lastFinished());

        wait.updateSet(5);
        comp.waitGt(9, -1L, BOUND);
        k = only().kernels();
        assertEquals(List.of(1L, 1L, 1L, 0), List.of(k.launched(), k.started(), k.finished(), k.pending()), "finished: " + k);
        assertEquals(k.lastLaunched(), k.lastFinished());
        assertEquals(null, k.failure());
        List<String> values = only().events().stream().map(e -> e.description().split(" ")[1] + "=" + e.value()).toList();
        assertTrue(values.contains(wait.id() + "=5") && values.contains(comp.id() + "=10"), "the values now: " + values);

        DocaDpaThread t = DocaDpaThread.create(d);
        t.setFuncArg(KernelProgsStubs.EU_WORKER, 0);
        t.setLocalStorage(rec);
        t.start();
        DocaDpaNotificationCompletion nc = DocaDpaNotificationCompletion.create(d, t);
        nc.start();
        DocaDpaObjects.Thread th = only().threads().get(0);
        assertEquals(List.of("euWorker", "started", -1, 0), List.of(th.func(), th.state(), th.eu(), th.activations()), th.toString());
        assertEquals(List.of("notification completion started, handle " + nc.getDpaHandle()), th.completions());
        nc.stop();
        nc.destroy();
        assertEquals(List.of(), only().threads().get(0).completions(), "a stopped notification no longer triggers it");
        t.destroy();
        assertEquals(List.of(), only().threads());

        comp.destroy();
        wait.destroy();
        assertEquals(List.of(), only().events(), "destroyed events are gone");
        d.stop();
        d.destroy();
    }
}
