package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.progs.KernelProgs;
import org.peerdirect.doca.dpa.progs.KernelProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * Sync events the DPA publishes and the host CPU subscribes to (NVIDIA's {@code dpa_kernel_launch}
 * and {@code dpa_initiator_target} completion events): the counter in the host's page, the DPA's
 * {@code doca_dpa_dev_sync_event_*} reaching it through the DPA context's window, the host's get
 * and wait_gt seeing the DPA's updates with no CPU update to wake them. Each test ends with no DPA
 * object and the machine's audit clean (the fixture).
 */
class DocaDpaHostEventTest extends DpaLabFixture {

    private static final Duration BOUND = Duration.ofSeconds(60);

    DocaDpaHostEventTest() {
        super(KernelProgsStubs.APP);
    }

    private DocaSyncEvent dpaToCpu() {
        DocaSyncEvent e = DocaSyncEvent.create();
        e.addPublisherLocationDpa(dpa);
        e.addSubscriberLocationCpu(dev);
        e.start();
        undo.add(e::destroy);
        return e;
    }

    private long dpaSet(long handle, long v) {
        return dpa.rpc(KernelProgsStubs.EVENT_SET, handle, v);
    }

    @Test
    void dpaUpdateSetAndAddAreSeenByTheHostsGetAndWait() throws Exception {
        DocaSyncEvent ev = dpaToCpu();
        long h = ev.getDpaHandle(dpa);
        assertEquals(h, ev.getDpaHandle(dpa), "one handle per event");
        CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> ev.waitGt(41, -1L, BOUND));
        assertThrows(java.util.concurrent.TimeoutException.class, () -> waiter.get(50, TimeUnit.MILLISECONDS), "nothing moved the event yet");
        dpaSet(h, 42);
        waiter.get(BOUND.toSeconds(), TimeUnit.SECONDS); // only the DPA's window store moved the host's counter
        assertEquals(42, ev.get());
        dpa.rpc(KernelProgsStubs.EVENT_ADD, h, 8L);
        assertEquals(50, ev.get(), "update_add through the window");
        ev.updateSet(7); // the host's store is what the DPA reads next (read_inv before its load)
        assertEquals(7, dpa.rpc(KernelProgsStubs.EVENT_GET, h));
    }

    @Test
    void waitGtMasksTheDpasValue() throws Exception {
        DocaSyncEvent ev = dpaToCpu();
        long h = ev.getDpaHandle(dpa);
        dpaSet(h, 0x100);
        DocaException e = assertThrows(DocaException.class, () -> ev.waitGt(0, 0xff, Duration.ofMillis(30)));
        assertEquals(DocaError.DOCA_ERROR_TIME_OUT, e.error(), "0x100 & 0xff is 0: not above 0");
        ev.waitGt(0xff, 0x1ff, BOUND);
        CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> ev.waitGt(0x1, 0xf, BOUND));
        dpaSet(h, 0x201); // & 0xf = 1: still not above 1
        assertThrows(java.util.concurrent.TimeoutException.class, () -> waiter.get(50, TimeUnit.MILLISECONDS));
        dpa.rpc(KernelProgsStubs.EVENT_ADD, h, 1L); // 0x202 & 0xf = 2
        waiter.get(BOUND.toSeconds(), TimeUnit.SECONDS);
        assertEquals(0x202, ev.get());
    }

    /** Sixteen ranks each add 1 to the host counter at once: the window's read-modify-write under the descriptor's lock loses none. */
    @Test
    void concurrentDpaAddsToAHostCounterAreExact() {
        DocaSyncEvent ev = dpaToCpu();
        DocaSyncEvent comp = dpaToCpu();
        long rec = alloc(dpa, 1024);
        dpa.h2dMemcpy(rec + KernelProgs.HANDLE, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(ev.getDpaHandle(dpa)).array());
        int n = 16;
        dpa.kernelLaunchUpdateAdd(null, 0, comp, 5, n, KernelProgsStubs.COUNT_ON, rec);
        comp.waitGt(4, -1L, BOUND); // the last rank's add of 5, after every rank's add
        assertEquals(n, ev.get(), "sixteen adds, none lost");
        assertEquals(5, comp.get(), "the completion event added to once");
    }

    /** Eight ranks each add 1 forty times: 320, none lost to another rank's read-modify-write (without the descriptor's lock some are). */
    @Test
    void manyInterleavedDpaAddsToAHostCounterAreExact() {
        DocaSyncEvent ev = dpaToCpu();
        DocaSyncEvent comp = dpaToCpu();
        long rec = alloc(dpa, 1024);
        dpa.h2dMemcpy(rec + KernelProgs.HANDLE, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(ev.getDpaHandle(dpa)).array());
        int n = 8;
        dpa.kernelLaunchUpdateSet(null, 0, comp, 1, n, KernelProgsStubs.COUNT_ON_MANY, rec);
        comp.waitGt(0, -1L, BOUND);
        assertEquals((long) n * KernelProgs.MANY, ev.get(), "every add of every rank");
    }

    @Test
    void aHostCounterReachedByASecondDpaContextOrAnotherPublisherIsRefused() {
        DocaSyncEvent cpu = DocaSyncEvent.create();
        cpu.addPublisherLocationCpu(dev);
        cpu.addSubscriberLocationCpu(dev);
        cpu.start();
        undo.add(cpu::destroy);
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class, () -> cpu.getDpaHandle(dpa)).error(),
                "no DPA location: DOCA gives no DPA handle");
        assertTrue((cpu.kernelCompletionDpaHandle(dpa) & 1) == 1, "a launch's completion may still be a CPU-only event of the process");
    }

    /** The completion event's DPA handle is made at the launch call: an event another DPA context's memory holds is refused there, naming it. */
    @Test
    void aCompletionEventOfAnotherDpaContextIsRefusedAtTheLaunch() {
        DocaDpa other = started(dev, KernelProgsStubs.APP);
        DocaSyncEvent theirs = DocaSyncEvent.create();
        theirs.addPublisherLocationDpa(other);
        theirs.addSubscriberLocationDpa(other);
        theirs.start();
        undo.add(theirs::destroy);
        DocaException e = assertThrows(DocaException.class,
                () -> dpa.kernelLaunchUpdateSet(null, 0, theirs, 1, 1, KernelProgsStubs.HELLO_WORLD, alloc(dpa, 1024)));
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, e.error());
        assertTrue(e.getMessage().contains("not a location of this event"), e.getMessage());
        assertEquals(0, dpa.kernelsPending(), "nothing submitted");
        DocaSyncEvent comp = dpaToCpu();
        dpa.kernelLaunchUpdateSet(null, 0, comp, 3, 1, KernelProgsStubs.HELLO_WORLD, alloc(dpa, 1024));
        comp.waitGt(2, -1L, BOUND); // the dispatcher did not fail: later launches run
    }

    /**
     * A CPU-only event as a launch's completion (peerdirect's chains): a host waiter asleep before
     * the launch (no DPA handle yet, so nothing but a CPU update would signal it) sees the last
     * rank's window update well within the bound, not at its end.
     */
    @Test
    void aWaiterAsleepOnACpuOnlyEventSeesTheLastRanksUpdate() throws Exception {
        DocaSyncEvent ev = DocaSyncEvent.create();
        ev.addPublisherLocationCpu(dev);
        ev.addSubscriberLocationCpu(dev);
        ev.start();
        undo.add(ev::destroy);
        java.util.concurrent.CountDownLatch asleep = new java.util.concurrent.CountDownLatch(1);
        CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> {
            asleep.countDown();
            ev.waitGt(6, -1L, Duration.ofSeconds(20));
        });
        asleep.await();
        assertThrows(java.util.concurrent.TimeoutException.class, () -> waiter.get(50, TimeUnit.MILLISECONDS), "nothing moved the event yet");
        long started = System.nanoTime();
        dpa.kernelLaunchUpdateSet(null, 0, ev, 7, 2, KernelProgsStubs.HELLO_WORLD, alloc(dpa, 1024));
        waiter.get(30, TimeUnit.SECONDS); // a TIME_OUT of the wait fails here
        assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(10), "woken by the handle's making, then polling; not at the bound");
        assertEquals(7, ev.get());
    }
}
