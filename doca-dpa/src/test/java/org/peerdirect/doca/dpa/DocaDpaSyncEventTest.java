package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.progs.KernelProgs;
import org.peerdirect.doca.dpa.progs.KernelProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * Sync events whose subscriber is the DPA (DPA_MODEL.md §2.5): the counter in DPA memory, the
 * DPA's {@code doca_dpa_dev_sync_event_*} on its handle, the host's get/set/wait through the DPA
 * runtime's copies; DOCA's {@code dpa_kernel_launch} sample with its wait event CPU→DPA as the
 * sample configures it. Each test ends with no DPA object and the machine's audit clean.
 */
class DocaDpaSyncEventTest extends DpaLabFixture {

    private static final Duration BOUND = Duration.ofSeconds(60);

    DocaDpaSyncEventTest() {
        super(KernelProgsStubs.APP);
    }

    @Override
    protected void beforeStart(DocaDpa d) {
        d.logFileSetPath(tmp.resolve("dpa.log").toString());
    }

    private DocaSyncEvent event(boolean cpuPublisher) {
        DocaSyncEvent e = DocaSyncEvent.create();
        if (cpuPublisher) {
            e.addPublisherLocationCpu(dev);
        } else {
            e.addPublisherLocationDpa(dpa);
        }
        e.addSubscriberLocationDpa(dpa);
        e.start();
        undo.add(e::destroy);
        return e;
    }

    private long record(DocaSyncEvent e) {
        long r = dpa.memAlloc(1024);
        dpa.memset(r, 0, 1024);
        dpa.h2dMemcpy(r + KernelProgs.HANDLE, le(e.getDpaHandle(dpa)));
        return r;
    }

    private List<String> logLines() {
        try {
            Path p = tmp.resolve("dpa.log");
            return java.nio.file.Files.exists(p) ? java.nio.file.Files.readAllLines(p) : List.of();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static byte[] le(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array();
    }

    private long load(long daddr) {
        return dpa.rpc(KernelProgsStubs.LOAD64, daddr);
    }

    @Test
    void dpaRanksAddToAnEventInDpaMemory() {
        DocaSyncEvent ev = event(false);
        long handle = ev.getDpaHandle(dpa);
        assertEquals(0, load(handle), "the counter is the handle's 8 bytes of DPA memory, zero at start");
        long rec = record(ev);
        DocaSyncEvent comp = DocaSyncEvent.create();
        comp.addPublisherLocationDpa(dpa);
        comp.addSubscriberLocationCpu(dev);
        comp.start();
        undo.add(comp::destroy);
        dpa.kernelLaunchUpdateSet(null, 0, comp, 1, 8, KernelProgsStubs.COUNT_ON, rec);
        comp.waitGt(0, -1L, BOUND);
        assertEquals(8, ev.get(), "eight atomic adds, none lost (the host reads DPA memory)");
        assertEquals(8, load(handle));
        ev.waitGt(7, -1L, BOUND);
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, assertThrows(DocaException.class, () -> ev.updateAdd(1)).error(),
                "a host add to a DPA counter could not be atomic with the DPA's");
        long hostHandle = comp.getDpaHandle(dpa);
        assertEquals(1, hostHandle & 1, "a DPA publisher of a host counter: a window descriptor's handle");
        assertEquals(hostHandle, comp.getDpaHandle(dpa), "the same handle at every call");
    }

    @Test
    void dpaWaitsOnAnEventTheHostSets() {
        DocaSyncEvent ev = event(true);
        long rec = record(ev);
        int n = 3;
        dpa.kernelLaunchUpdateSet(null, 0, null, 0, n, KernelProgsStubs.WAIT_ON, rec);
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (load(rec + 8) < n) {
            assertTrue(System.nanoTime() < deadline, "the ranks did not all start within " + BOUND);
        }
        ev.updateSet(4); // not > 4
        for (int i = 0; i < 20; i++) {
            assertEquals(0, load(rec), "no rank passed wait_gt(4) at 4");
        }
        ev.updateSet(7);
        while (load(rec) < n) {
            assertTrue(System.nanoTime() < deadline, "the ranks did not pass wait_gt within " + BOUND);
        }
        for (int rank = 0; rank < n; rank++) {
            assertEquals(7, load(rec + 16 + 8L * rank), "rank " + rank + " read the value the host set");
        }
        assertEquals(7, ev.get());
    }

    /** Seed 001's chain on an event the DPA publishes and subscribes to (counter in DPA memory); under {@code >} the host kicks it. */
    @Test
    void seedChainOnAnEventInDpaMemory() {
        DocaSyncEvent ev = event(false);
        long log = dpa.memAlloc(256);
        dpa.memset(log, 0, 256);
        dpa.kernelLaunchUpdateAdd(ev, 2, ev, 1, 1, KernelProgsStubs.FUNC3, log);
        dpa.kernelLaunchUpdateAdd(ev, 1, ev, 1, 1, KernelProgsStubs.FUNC2, log);
        dpa.kernelLaunchUpdateAdd(ev, 0, ev, 1, 1, KernelProgsStubs.FUNC1, log);
        for (int i = 0; i < 10; i++) {
            assertEquals(0, load(log), "nothing passes 0 at 0");
        }
        ev.updateSet(1);
        ev.waitGt(3, -1L, BOUND);
        assertEquals(4, ev.get());
        assertEquals(List.of(3L, 1L, 2L, 3L), List.of(load(log), load(log + 8), load(log + 16), load(log + 24)), "func1 → func2 → func3");
        assertEquals(null, dpa.kernelFailure());
    }

    /** DOCA's dpa_kernel_launch sample as it configures its events: wait CPU→DPA, completion DPA→CPU. */
    @Test
    void kernelLaunchSampleWithItsEvents() {
        DocaSyncEvent wait = event(true);
        DocaSyncEvent comp = DocaSyncEvent.create();
        comp.addPublisherLocationDpa(dpa);
        comp.addSubscriberLocationCpu(dev);
        comp.start();
        undo.add(comp::destroy);
        long rec = dpa.memAlloc(1024);
        dpa.memset(rec, 0, 1024);
        dpa.kernelLaunchUpdateSet(wait, 4, comp, 10, 1, KernelProgsStubs.HELLO_WORLD, rec);
        wait.updateSet(4);
        for (int i = 0; i < 20; i++) {
            assertEquals(0, load(rec + 8), "hello_world did not start at 4");
        }
        wait.updateSet(5);
        comp.waitGt(9, -1L, BOUND);
        assertEquals(10, comp.get());
        assertEquals(1, load(rec), "hello_world ran once");
        assertEquals(1001, load(rec + 16));
        long deadline = System.nanoTime() + BOUND.toNanos();
        List<String> lines;
        while ((lines = logLines()).isEmpty()) { // the SYNC stream's host thread prints as lines arrive
            assertTrue(System.nanoTime() < deadline, "no device log line within " + BOUND);
            Thread.onSpinWait();
        }
        assertEquals(List.of("Hello from kernel"), lines, "the sample's line, once; the DEBUG line filtered at INFO");
    }
}
