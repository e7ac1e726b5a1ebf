package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.progs.KernelProgsStubs;
import org.peerdirect.doca.dpa.progs.NoRuntimeProgs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.flexio.FlexioApp;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevMsg;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.flexio.dev.FlexioDevRpc;
import org.peerdirect.hca.dpa.ImagePackager;

/**
 * DPA_MODEL.md §4 scenario 5 on a BlueField-3: DOCA's {@code dpa_kernel_launch} sample (a kernel
 * gated by a CPU-published wait event, a DPA-published completion event the host waits on) and
 * Seed 001's three-kernel chain on one event; plus the guard a dispatcher that sets the completion
 * event before the last rank ended fails. Each test ends with no DPA object in the firmware and
 * the machine's audit clean.
 */
class DocaDpaKernelLaunchTest {

    private static final long ALL = -1L;
    private static final Duration BOUND = Duration.ofSeconds(60);

    @TempDir
    Path tmp;
    private DpaLab lab;
    private DocaDev dev;
    private DocaDpa dpa;
    private final List<DocaSyncEvent> events = new ArrayList<>();

    @BeforeEach
    void up() {
        lab = new DpaLab(tmp);
        dev = lab.open(0);
    }

    @AfterEach
    void down() {
        events.forEach(DocaSyncEvent::destroy);
        if (dpa != null) {
            dpa.stop();
            dpa.destroy();
        }
        assertEquals(List.of(), dpaProcesses(), "no DPA process left");
        dev.close();
        lab.close(); // not in a finally: its failure would hide the first one
    }

    /** The firmware's DPA processes and threads ({@code dpa:ps} without the EU lines). */
    private List<String> dpaProcesses() {
        return lab.dpa().stream().filter(l -> !l.startsWith("eu")).toList();
    }

    private DocaDpa started(DocaDpa.WaitComparison c) {
        dpa = DocaDpa.create(dev);
        dpa.setApp(KernelProgsStubs.APP);
        dpa.setWaitComparison(c);
        dpa.setLogLevel(org.peerdirect.doca.dpa.dev.DocaDpaDev.LOG_LEVEL_DEBUG);
        dpa.logFileSetPath(tmp.resolve("dpa.log").toString());
        dpa.start();
        return dpa;
    }

    /** An event the host publishes and subscribes to (DocaDpaSyncEventTest runs the sample with its wait event CPU→DPA). */
    private DocaSyncEvent cpuEvent() {
        DocaSyncEvent e = DocaSyncEvent.create();
        e.addPublisherLocationCpu(dev);
        e.addSubscriberLocationCpu(dev);
        e.start();
        events.add(e);
        return e;
    }

    /** The sample's completion event: the DPA publishes, the host subscribes. */
    private DocaSyncEvent dpaToCpuEvent() {
        DocaSyncEvent e = DocaSyncEvent.create();
        e.addPublisherLocationDpa(dpa);
        e.addSubscriberLocationCpu(dev);
        e.start();
        events.add(e);
        return e;
    }

    private long load(long daddr) {
        return dpa.rpc(KernelProgsStubs.LOAD64, daddr);
    }

    private long record(int bytes) {
        long r = dpa.memAlloc(bytes);
        dpa.memset(r, 0, bytes);
        return r;
    }

    @Test
    void kernelStartsOnlyOnceTheWaitEventPassesAndTheHostSeesItsCompletion() {
        started(DocaDpa.WaitComparison.GT);
        DocaSyncEvent wait = cpuEvent();
        DocaSyncEvent comp = dpaToCpuEvent();
        long rec = record(1024);
        int n = 4;
        dpa.kernelLaunchUpdateSet(wait, 4, comp, 10, n, KernelProgsStubs.HELLO_WORLD, rec);

        wait.updateSet(4); // not past 4: the kernel must not start
        for (int i = 0; i < 20; i++) {
            assertEquals(0, load(rec + 8), "no rank started before the wait event passed 4");
        }
        assertEquals(0, comp.get());
        assertEquals(1, dpa.kernelsPending());

        wait.updateSet(5); // the sample's host thread
        comp.waitGt(9, ALL, BOUND);
        assertEquals(10, comp.get(), "update_set: the completion event set to 10");
        assertEquals(n, load(rec), "every rank ended before the completion event moved");
        assertEquals(n, load(rec + 8), "each rank ran once");
        for (int rank = 0; rank < n; rank++) {
            assertEquals(n * 1000L + rank + 1, load(rec + 16 + 8L * rank), "rank " + rank + " saw its rank and num_threads");
        }
        assertEquals(0, dpa.kernelsPending());
        assertEquals(null, dpa.kernelFailure());
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (logLines().size() < 2 * n) { // the SYNC stream's host thread prints as lines arrive
            assertTrue(System.nanoTime() < deadline, "not every rank's lines within " + BOUND + ": " + logLines());
            Thread.onSpinWait();
        }
        List<String> lines = logLines();
        assertEquals(n, lines.stream().filter("Hello from kernel"::equals).count(), "one line per rank: " + lines);
        assertEquals(n, lines.stream().filter("debug line of hello_world"::equals).count(), "DEBUG passes at DEBUG: " + lines);
    }

    private List<String> logLines() {
        try {
            Path p = tmp.resolve("dpa.log");
            return java.nio.file.Files.exists(p) ? java.nio.file.Files.readAllLines(p) : List.of();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /**
     * A launch runs on the DPA's data path (doca-dpa-dev's kernel runtime): once a pool slot with
     * enough ranks exists, launches run no firmware command but the status queries of slow ones.
     */
    @Test
    void launchesAfterTheFirstRunNoFirmwareCommand() {
        started(DocaDpa.WaitComparison.GT);
        DocaSyncEvent comp = dpaToCpuEvent();
        long rec = record(1024);
        int n = 2;
        dpa.kernelLaunchUpdateSet(null, 0, comp, 1, n, KernelProgsStubs.HELLO_WORLD, rec);
        comp.waitGt(0, ALL, BOUND);
        long commands = lab.models.get(0).commandsExecuted();
        long queries = dpa.kernelStatusQueries() + dpa.flexioProcess().rpcStatusQueries();
        int launches = 6;
        for (int k = 2; k <= launches; k++) {
            dpa.kernelLaunchUpdateSet(null, 0, comp, k, n, KernelProgsStubs.HELLO_WORLD, rec);
            comp.waitGt(k - 1, ALL, BOUND);
        }
        assertEquals(0, dpa.kernelsPending());
        // A status query is counted before its command executes, and the watchdog and the RPC path
        // each have at most one in flight: a sample can be off by one per path, at each end. Five
        // launches with a command each would be 5 or more over.
        long beyond = (lab.models.get(0).commandsExecuted() - commands) - (dpa.kernelStatusQueries() + dpa.flexioProcess().rpcStatusQueries() - queries);
        assertTrue(Math.abs(beyond) <= 2, beyond + " firmware commands beyond status queries for " + (launches - 1) + " launches");
        assertEquals((long) n * launches, load(rec), "every rank of every launch ended");
        assertEquals((long) n * launches, load(rec + 8), "each rank ran once per launch");
    }

    /** An image without doca-dpa-dev's kernel runtime (not linked by dpacc): each launch fails at the call naming it, the context unharmed. */
    @Test
    void aLaunchOnAnImageWithoutTheKernelRuntimeFailsNamingIt() {
        FlexioFunc empty = new FlexioFunc("empty", FlexioFunc.Kind.GLOBAL, 8,
                args -> ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(((Number) args[0]).longValue()).array());
        byte[] image = new ImagePackager().add(FlexioDev.class).add(FlexioDevQueue.class).add(FlexioDevMsg.class).add(FlexioDevRpc.class)
                .global(FlexioDevRpc.SYMBOL, FlexioDevRpc.class, "rpcHandler")
                .add(NoRuntimeProgs.class).global("empty", NoRuntimeProgs.class, "empty").pack();
        dpa = DocaDpa.create(dev);
        dpa.setApp(FlexioApp.create("no_runtime", image, List.of(empty)));
        dpa.start();
        DocaException f = assertThrows(DocaException.class, () -> dpa.kernelLaunchUpdateSet(null, 0, null, 0, 1, empty, 0L));
        assertEquals(DocaError.DOCA_ERROR_DRIVER, f.error(), f.getMessage());
        assertTrue(f.getMessage().contains("kernel runtime") && f.getMessage().contains("empty__launch"), f.getMessage());
        assertEquals(null, dpa.kernelFailure(), "refused at the call: nothing reached the DPA, the context is unharmed");
        assertEquals(0, dpa.kernelsPending(), "nothing taken");
        DocaException next = assertThrows(DocaException.class, () -> dpa.kernelLaunchUpdateSet(null, 0, null, 0, 1, empty, 0L));
        assertEquals(DocaError.DOCA_ERROR_DRIVER, next.error(), "the next launch fails the same way: " + next.getMessage());
    }

    @Test
    void completionEventMovesOnlyAfterTheLastRankEnded() {
        started(DocaDpa.WaitComparison.GT);
        DocaSyncEvent comp = dpaToCpuEvent();
        long rec = record(1024);
        int n = 3;
        dpa.kernelLaunchUpdateAdd(null, 0, comp, 1, n, KernelProgsStubs.GATED, rec);

        long deadline = System.nanoTime() + BOUND.toNanos();
        while (load(rec + 8) < n) { // every rank running, held at its gate
            assertTrue(System.nanoTime() < deadline, "the ranks did not all start within " + BOUND);
        }
        for (int i = 0; i < 20; i++) {
            assertEquals(0, comp.get(), "the completion event moved while every rank still runs");
            assertEquals(0, load(rec), "no rank ended before the gate opened");
        }
        dpa.h2dMemcpy(rec + 512, new byte[] {1, 0, 0, 0, 0, 0, 0, 0});
        comp.waitGt(0, ALL, BOUND);
        assertEquals(1, comp.get(), "update_add of 1");
        assertEquals(n, load(rec), "every rank ended");
        for (int rank = 0; rank < n; rank++) {
            assertEquals(n * 1000L + rank + 1, load(rec + 16 + 8L * rank));
        }
    }

    @Test
    void threeKernelChainOnOneEventRunsInOrder() {
        started(DocaDpa.WaitComparison.GE); // Seed 001's chain starts from 0: "passes" as >=
        DocaSyncEvent ev = cpuEvent();
        long log = record(256);
        // submitted last-first: the order comes from the event, not from submission
        dpa.kernelLaunchUpdateAdd(ev, 2, ev, 1, 1, KernelProgsStubs.FUNC3, log);
        dpa.kernelLaunchUpdateAdd(ev, 1, ev, 1, 1, KernelProgsStubs.FUNC2, log);
        dpa.kernelLaunchUpdateAdd(ev, 0, ev, 1, 1, KernelProgsStubs.FUNC1, log);
        ev.waitGt(2, ALL, BOUND);
        assertEquals(3, ev.get());
        assertEquals(3, load(log), "three kernels ran");
        assertEquals(List.of(1L, 2L, 3L), List.of(load(log + 8), load(log + 16), load(log + 24)), "func1 → func2 → func3");
    }

    @Test
    void chainUnderGreaterThanWaitsForTheHostsKick() {
        started(DocaDpa.WaitComparison.GT);
        DocaSyncEvent ev = cpuEvent();
        long log = record(256);
        dpa.kernelLaunchUpdateAdd(ev, 2, ev, 1, 1, KernelProgsStubs.FUNC3, log);
        dpa.kernelLaunchUpdateAdd(ev, 1, ev, 1, 1, KernelProgsStubs.FUNC2, log);
        dpa.kernelLaunchUpdateAdd(ev, 0, ev, 1, 1, KernelProgsStubs.FUNC1, log);
        for (int i = 0; i < 10; i++) {
            assertEquals(0, load(log), "with >, nothing passes 0 at 0");
        }
        ev.updateSet(1);
        ev.waitGt(3, ALL, BOUND);
        assertEquals(4, ev.get());
        assertEquals(List.of(3L, 1L, 2L, 3L), List.of(load(log), load(log + 8), load(log + 16), load(log + 24)));
    }

    @Test
    void contextCallsAndBadInput() {
        DocaDev cx6 = lab.open(1);
        DocaException e = assertThrows(DocaException.class, () -> DocaDpa.create(cx6));
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, e.error(), e.getMessage());
        assertFalse(DocaDpa.capIsSupported(cx6), "a ConnectX-6 Dx has no DPA");
        cx6.close();
        assertTrue(DocaDpa.capIsSupported(dev));

        DocaDpa d = DocaDpa.create(dev);
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class, () -> d.memAlloc(64)).error());
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class,
                () -> d.kernelLaunchUpdateSet(null, 0, null, 0, 1, KernelProgsStubs.HELLO_WORLD, 0L)).error(), "launch before start");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class, d::start).error(), "start without an app");
        d.setApp(KernelProgsStubs.APP);
        d.start();
        dpa = d;
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class, () -> d.setApp(KernelProgsStubs.APP)).error());
        assertEquals(42, d.rpc(KernelProgsStubs.ADD, 40L, 2L));
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class, () -> d.rpc(KernelProgsStubs.HELLO_WORLD, 1L)).error());
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class, () -> d.rpc(KernelProgsStubs.ADD, 1L)).error(),
                "one argument short");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class,
                () -> d.kernelLaunchUpdateSet(null, 0, null, 0, 0, KernelProgsStubs.HELLO_WORLD, 0L)).error(), "nthreads 0");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class,
                () -> d.kernelLaunchUpdateSet(null, 0, null, 0, 1, KernelProgsStubs.ADD, 0L, 0L)).error(), "an RPC as kernel");
        org.peerdirect.doca.syncevent.DocaSyncEvent unstarted = org.peerdirect.doca.syncevent.DocaSyncEvent.create();
        unstarted.addPublisherLocationCpu(dev);
        unstarted.addSubscriberLocationDpa(d);
        DocaException notStarted = assertThrows(DocaException.class,
                () -> d.kernelLaunchUpdateSet(unstarted, 0, null, 0, 1, KernelProgsStubs.HELLO_WORLD, 0L));
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, notStarted.error(), notStarted.getMessage());
        assertTrue(notStarted.getMessage().contains("wait event (doca_sync_event " + unstarted.id() + ") is not started"), notStarted.getMessage());
        assertEquals(null, d.kernelFailure(), "refused at the call: the context is not poisoned");
        unstarted.destroy();

        long m = d.memAlloc(256);
        d.h2dMemcpy(m, new byte[] {1, 2, 3, 4, 5, 6, 7, 8});
        assertEquals(0x0807060504030201L, load(m));
        d.memset(m, 0xab, 16);
        assertEquals(0xababababababababL, load(m + 8));
        byte[] back = d.d2hMemcpy(m + 14, 4);
        assertEquals(List.of((byte) 0xab, (byte) 0xab, (byte) 0, (byte) 0), List.of(back[0], back[1], back[2], back[3]), "d2h: the bytes in DPA memory");
        DocaException outside = assertThrows(DocaException.class, () -> d.h2dMemcpy(0x10, new byte[8]));
        assertEquals(DocaError.DOCA_ERROR_DRIVER, outside.error(), outside.getMessage());
        assertTrue(outside.getMessage().contains("outside the heap"), outside.getMessage());
        assertEquals(DocaError.DOCA_ERROR_DRIVER, assertThrows(DocaException.class, () -> d.d2hMemcpy(0x10, 8)).error());
        d.memFree(m);
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class, () -> d.memFree(m)).error(), "double free");
        assertEquals(DocaError.DOCA_ERROR_NO_MEMORY, assertThrows(DocaException.class, () -> d.memAlloc(1L << 40)).error());

        assertEquals(DocaError.DOCA_ERROR_IN_USE, assertThrows(DocaException.class, d::destroy).error(), "destroy while started");
        assertEquals(DocaError.DOCA_ERROR_IN_USE, assertThrows(DocaException.class, dev::close).error(), "the device is held");
        d.stop();
        assertEquals(List.of(), dpaProcesses(), "stop destroyed the DPA process");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class, d::stop).error());
        d.destroy();
        dpa = null;
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class, d::destroy).error(), "double destroy");
    }
}
