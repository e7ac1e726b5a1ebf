package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.peerdirect.doca.dpa.progs.KernelProgs;
import org.peerdirect.doca.dpa.progs.KernelProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * The wait of a kernel launch on the DPA ({@code DocaDpaDevKernelQueue}, {@link KernelDispatcher}):
 * no host RPC between the links of a chain the DPA updates, exactly one RPC for a host update,
 * a kernel never starting before its event passes (many rounds, racing updaters), the host's slow
 * look only for a remote-published event, and a stop with launches still queued leaving nothing.
 */
class DocaDpaKernelDispatchTest extends DpaLabFixture {

    private static final long ALL = -1L;
    private static final Duration BOUND = Duration.ofSeconds(60);

    DocaDpaKernelDispatchTest() {
        super(null);
    }

    private DocaDpa context(DocaDpa.WaitComparison c) {
        DocaDpa d = DocaDpa.create(dev);
        d.setApp(KernelProgsStubs.APP);
        d.setWaitComparison(c);
        d.start();
        dpas.add(d);
        dpa = d;
        return d;
    }

    private DocaSyncEvent cpuEvent() {
        DocaSyncEvent e = DocaSyncEvent.create();
        e.addPublisherLocationCpu(dev);
        e.addSubscriberLocationCpu(dev);
        e.start();
        undo.add(e::destroy);
        return e;
    }

    /** The sample's wait event: the CPU publishes, the DPA subscribes (its counter in DPA memory). */
    private DocaSyncEvent cpuToDpaEvent() {
        DocaSyncEvent e = DocaSyncEvent.create();
        e.addPublisherLocationCpu(dev);
        e.addSubscriberLocationDpa(dpa);
        e.start();
        undo.add(e::destroy);
        return e;
    }

    private long load(long daddr) {
        return dpa.rpc(KernelProgsStubs.LOAD64, daddr);
    }

    /** Firmware commands beyond the launch dispatcher's status queries, since {@code before} (see {@link #commands}). */
    private long[] commands() {
        while (true) { // two equal readings: no status query between its command and its count
            long[] a = {lab.models.get(0).commandsExecuted(), dpa.kernelStatusQueries() + dpa.flexioProcess().rpcStatusQueries()};
            long[] b = {lab.models.get(0).commandsExecuted(), dpa.kernelStatusQueries() + dpa.flexioProcess().rpcStatusQueries()};
            if (a[0] == b[0] && a[1] == b[1]) {
                return a;
            }
        }
    }

    private long commandsSince(long[] before) {
        long[] now = commands();
        return (now[0] - before[0]) - (now[1] - before[1]);
    }

    /** Seed 001's chain, twice: on a host counter (the DPA's window) and on a DPA counter (the DPA's atomics). */
    @Test
    void aChainOnOneEventRunsWithNoHostRpcBetweenItsLaunches() {
        context(DocaDpa.WaitComparison.GE);
        DocaSyncEvent warm = dpaEvent();
        DocaSyncEvent hold = dpaEvent();
        long scratch = alloc(256);
        for (int i = 0; i < 3; i++) { // the queue and three one-rank slots (all held at once): the firmware commands of a first run
            dpa.kernelLaunchUpdateAdd(hold, 1, warm, 1, 1, KernelProgsStubs.FUNC1, scratch); // >= 1 under GE
        }
        hold.updateSet(1);
        warm.waitGt(2, ALL, BOUND);
        assertEquals(0, dpa.kernelsPending(), "the three slots free again");
        for (DocaSyncEvent ev : List.of(cpuEvent(), dpaEvent())) {
            long log = alloc(256);
            ev.kernelCompletionDpaHandle(dpa); // a host counter's window handle: a key of the DPA process, made once (commands)
            long[] before = commands();
            long kicks = dpa.kernelKicks();
            dpa.kernelLaunchUpdateAdd(ev, 3, ev, 1, 1, KernelProgsStubs.FUNC3, log); // waits for 3: nothing passes yet
            dpa.kernelLaunchUpdateAdd(ev, 2, ev, 1, 1, KernelProgsStubs.FUNC2, log);
            assertEquals(kicks + 2, dpa.kernelKicks(), "one RPC per submission");
            dpa.kernelLaunchUpdateAdd(ev, 1, ev, 1, 1, KernelProgsStubs.FUNC1, log); // waits for 1: the chain's start is the last link
            assertEquals(0, load(log), "nothing passed before the first link's event");
            // the first link's event: a DPA update for the DPA counter, the host's for the host one (one RPC, its hook)
            if (ev.subscriberLocation() == DocaSyncEvent.Location.DPA) {
                dpa.rpc(KernelProgsStubs.EVENT_ADD, ev.getDpaHandle(dpa), 1L);
            } else {
                ev.updateAdd(1);
            }
            long afterKick = dpa.kernelKicks();
            ev.waitGt(3, ALL, BOUND);
            assertEquals(4, ev.get());
            assertEquals(List.of(3L, 1L, 2L, 3L), List.of(load(log), load(log + 8), load(log + 16), load(log + 24)), "func1 → func2 → func3");
            assertEquals(afterKick, dpa.kernelKicks(), "no RPC between the links: each rank's update woke the DPA's dispatcher");
            assertEquals(kicks + 3 + (ev.subscriberLocation() == DocaSyncEvent.Location.DPA ? 0 : 1), afterKick);
            assertEquals(0, commandsSince(before), "no firmware command but status queries");
            assertEquals(0, dpa.kernelsPending());
        }
    }

    /**
     * 25 chains of three in seeded submission orders on one DPA counter, each started by a DPA
     * update: a link's last rank updates the event while the dispatcher may still be in the pass
     * that started it (before it reschedules), so a lost wake-up (an activation of the running
     * dispatcher not re-running it, an update between its look and its watch) stalls a chain.
     */
    @Test
    void chainsInSeededOrdersLoseNoWakeUp() {
        context(DocaDpa.WaitComparison.GE);
        DocaSyncEvent ev = dpaEvent();
        long h = ev.getDpaHandle(dpa);
        Random rnd = new Random(4343);
        long log = alloc(8 + 8 * 3 * 25 + 64);
        List<org.peerdirect.flexio.FlexioFunc> funcs = List.of(KernelProgsStubs.FUNC1, KernelProgsStubs.FUNC2, KernelProgsStubs.FUNC3);
        List<Long> want = new ArrayList<>();
        for (int round = 0; round < 25; round++) {
            long base = 4L * round; // the round's trigger moves the event to base + 1; links wait for base + 1, + 2, + 3
            List<Integer> order = new ArrayList<>(List.of(0, 1, 2));
            Collections.shuffle(order, rnd);
            for (int k : order) {
                dpa.kernelLaunchUpdateAdd(ev, base + 1 + k, ev, 1, 1, funcs.get(k), log);
            }
            long kicks = dpa.kernelKicks();
            dpa.rpc(KernelProgsStubs.EVENT_ADD, h, 1L); // a DPA update starts the chain
            ev.waitGt(base + 3, ALL, BOUND);
            assertEquals(kicks, dpa.kernelKicks(), "round " + round + ": no RPC within the chain");
            want.addAll(List.of(1L, 2L, 3L));
            assertEquals(base + 4, ev.get());
        }
        List<Long> got = new ArrayList<>();
        for (int i = 0; i < want.size(); i++) {
            got.add(load(log + 8 + 8L * i));
        }
        assertEquals(want, got, "func1 → func2 → func3 in every round");
    }

    /**
     * A launch without a wait event while nothing else is in flight goes by the start RPC (no
     * queue, no kick); with another launch still running it is queued (one kick), so launches
     * that passed keep their submission order.
     */
    @Test
    void aLoneLaunchWithoutAWaitIsStartedDirectly() {
        context(DocaDpa.WaitComparison.GT);
        DocaSyncEvent comp = dpaEvent();
        long rec = alloc(1024);
        long gate = alloc(1024);
        dpa.kernelLaunchUpdateAdd(null, 0, comp, 1, 1, KernelProgsStubs.HELLO_WORLD, rec);
        comp.waitGt(0, ALL, BOUND);
        long kicks = dpa.kernelKicks();
        dpa.kernelLaunchUpdateAdd(null, 0, comp, 1, 2, KernelProgsStubs.GATED, gate); // alone: direct; its ranks hold
        assertEquals(kicks, dpa.kernelKicks(), "started by the start RPC");
        dpa.kernelLaunchUpdateAdd(null, 0, comp, 1, 1, KernelProgsStubs.HELLO_WORLD, rec); // the gated one in flight: queued
        assertEquals(kicks + 1, dpa.kernelKicks(), "queued behind a launch in flight");
        comp.waitGt(1, ALL, BOUND);
        assertEquals(2, load(rec + 8), "the queued launch ran while the gated one holds");
        dpa.h2dMemcpy(gate + 512, new byte[] {1, 0, 0, 0, 0, 0, 0, 0});
        comp.waitGt(2, ALL, BOUND);
        assertEquals(2, load(gate), "both gated ranks ended");
    }

    /**
     * More launches than the queue's ring has positions, one after the other: the ring wraps, the
     * host reads the DPA's head when its count says full (the dispatcher writes the head back:
     * without, the host read a stale head and refused the 257th launch).
     */
    @Test
    void theQueueWrapsPastItsRing() {
        context(DocaDpa.WaitComparison.GT);
        DocaSyncEvent comp = dpaEvent();
        DocaSyncEvent go = dpaEvent();
        go.updateSet(1); // passed: each launch goes through the queue (a launch without a wait event, alone, is started directly)
        long rec = alloc(1024);
        int n = org.peerdirect.doca.dpa.dev.DocaDpaDevKernelQueue.CAPACITY + 44;
        long kicks = dpa.kernelKicks();
        for (int k = 1; k <= n; k++) {
            dpa.kernelLaunchUpdateAdd(go, 0, comp, 1, 1, KernelProgsStubs.HELLO_WORLD, rec);
            comp.waitGt(k - 1, ALL, BOUND);
        }
        assertEquals(null, dpa.kernelFailure());
        assertEquals(n, load(rec + 8), "each launch ran once");
        assertEquals(0, dpa.kernelsPending());
        assertEquals(List.of("no memory-model finding (check mode STRICT)"), lab.findings(), "the checker saw the host read no dirty granule (C1)");
        assertEquals(kicks + n, dpa.kernelKicks(), "every launch queued (one kick each)");
    }

    /** The sample's wait: a launch gated by a CPU-published event starts after the update with exactly one RPC, never before. */
    @Test
    void aHostUpdateStartsAWaitingLaunchWithExactlyOneRpc() {
        context(DocaDpa.WaitComparison.GT);
        for (DocaSyncEvent wait : List.of(cpuEvent(), cpuToDpaEvent())) {
            DocaSyncEvent comp = dpaEvent();
            long rec = alloc(1024);
            dpa.kernelLaunchUpdateSet(wait, 4, comp, 10, 2, KernelProgsStubs.HELLO_WORLD, rec);
            long kicks = dpa.kernelKicks();
            wait.updateSet(4); // not past 4
            assertEquals(kicks + 1, dpa.kernelKicks(), "the update's RPC (the DPA looks and leaves the launch queued)");
            for (int i = 0; i < 10; i++) {
                assertEquals(0, load(rec + 8), "no rank started before the wait event passed 4");
            }
            wait.updateSet(5);
            assertEquals(kicks + 2, dpa.kernelKicks(), "exactly one RPC for the passing update");
            comp.waitGt(9, ALL, BOUND);
            assertEquals(2, load(rec));
            assertEquals(0, dpa.kernelsPending());
            wait.updateSet(6); // no launch waits any more: no hook, no RPC
            assertEquals(kicks + 2, dpa.kernelKicks(), "the hook went with the launch");
        }
    }

    /**
     * Many rounds, seeded: launches on two events, each updated by its own thread at once (host
     * updates racing each other and the DPA's dispatcher pass), thresholds stepping past and short
     * of the value; a kernel's ranks never run before its event passed (each kernel reads its own
     * wait event at its start and counts a value not past its threshold) and each launch runs once.
     */
    @Test
    void aKernelNeverStartsBeforeItsEventPassesUnderRacingUpdates() throws Exception {
        context(DocaDpa.WaitComparison.GT);
        DocaSyncEvent a = cpuEvent();
        DocaSyncEvent b = cpuToDpaEvent();
        DocaSyncEvent comp = dpaEvent();
        Random rnd = new Random(43);
        int rounds = 40;
        long rec = alloc(1024);
        long blocks = alloc(2L * rounds * KernelProgs.WS_SIZE); // each launch's: its event, its threshold, early starts, runs
        long ha = a.kernelCompletionDpaHandle(dpa);
        long hb = b.getDpaHandle(dpa);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            for (int r = 1; r <= rounds; r++) {
                long ta = 2L * r;
                long tb = 2L * r;
                long ba = blocks + (2L * r - 2) * KernelProgs.WS_SIZE;
                long bb = ba + KernelProgs.WS_SIZE;
                dpa.h2dMemcpy(ba, ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(ha).putLong(ta).array());
                dpa.h2dMemcpy(bb, ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(hb).putLong(tb).array());
                dpa.kernelLaunchUpdateAdd(a, ta, comp, 1, 1, KernelProgsStubs.WAIT_SEEN, ba);
                dpa.kernelLaunchUpdateAdd(b, tb, comp, 1, 1, KernelProgsStubs.WAIT_SEEN, bb);
                // to the threshold, not past it: nothing may start
                CyclicBarrier together = new CyclicBarrier(2);
                List<Future<?>> f = new ArrayList<>();
                f.add(pool.submit(() -> { together.await(); a.updateSet(ta); return null; }));
                f.add(pool.submit(() -> { together.await(); b.updateSet(tb); return null; }));
                for (Future<?> x : f) {
                    x.get(30, TimeUnit.SECONDS);
                }
                for (int i = 0; i < 1 + rnd.nextInt(3); i++) {
                    assertEquals(0, load(ba + KernelProgs.WS_RUNS) + load(bb + KernelProgs.WS_RUNS),
                            "round " + r + ": a rank ran before its event passed");
                }
                // past it, at once, in a seeded order
                List<Runnable> ups = new ArrayList<>(List.of(() -> a.updateSet(ta + 1), () -> b.updateSet(tb + 1)));
                Collections.shuffle(ups, rnd);
                CyclicBarrier go = new CyclicBarrier(2);
                f.clear();
                for (Runnable u : ups) {
                    f.add(pool.submit(() -> { go.await(); u.run(); return null; }));
                }
                for (Future<?> x : f) {
                    x.get(30, TimeUnit.SECONDS);
                }
                comp.waitGt(2L * r - 1, ALL, BOUND);
                assertEquals(1, load(ba + KernelProgs.WS_RUNS), "round " + r + ": the launch on a ran once");
                assertEquals(1, load(bb + KernelProgs.WS_RUNS), "round " + r + ": the launch on b ran once");
                assertEquals(0, load(ba + KernelProgs.WS_EARLY) + load(bb + KernelProgs.WS_EARLY),
                        "round " + r + ": a kernel saw its own wait event not yet past its threshold at its start");
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(2L * rounds, comp.get());
        assertEquals(0, dpa.kernelsPending());
    }

    /**
     * [model] A remote-published event (a peer's RDMA moves it: here a copy into the counter
     * behind the event's back, as the NIC's write is) wakes nothing: the host's slow look lets
     * the launch go once the value passed, with one RPC; before, the kernel does not start.
     */
    @Test
    void aRemotePublishedEventIsSeenByTheHostsSlowLook() {
        context(DocaDpa.WaitComparison.GT);
        DocaSyncEvent remote = DocaSyncEvent.create();
        remote.addPublisherLocationRemoteNet();
        remote.addSubscriberLocationDpa(dpa);
        remote.start();
        undo.add(remote::destroy);
        DocaSyncEvent comp = dpaEvent();
        long rec = alloc(1024);
        dpa.kernelLaunchUpdateSet(remote, 0, comp, 1, 1, KernelProgsStubs.HELLO_WORLD, rec);
        long kicks = dpa.kernelKicks();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(20); // several looks
        while (System.nanoTime() < deadline) {
            assertEquals(0, load(rec + 8), "the kernel started before the remote event passed 0");
        }
        assertEquals(kicks, dpa.kernelKicks(), "a look that saw nothing pass made no RPC");
        dpa.h2dMemcpy(remote.getDpaHandle(dpa), ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(1).array());
        comp.waitGt(0, ALL, BOUND);
        assertEquals(1, load(rec + 8));
        assertEquals(kicks + 1, dpa.kernelKicks(), "the look's one RPC");
    }

    /**
     * Bad input: the wait event of a launch still queued is stopped (a host counter) or destroyed (a
     * DPA counter): the launch never runs, the dispatcher fails with BAD_STATE naming the event
     * (never a hang, never the DPA reading a freed counter), later launches are refused, a launch
     * already running ends; the process lives on.
     */
    @Test
    void aWaitEventGoingUnderAQueuedLaunchFailsItNamingTheEvent() {
        for (boolean dpaCounter : new boolean[] {false, true}) {
            DocaDpa d = context(DocaDpa.WaitComparison.GT);
            DocaSyncEvent wait = DocaSyncEvent.create();
            wait.addPublisherLocationCpu(dev);
            if (dpaCounter) {
                wait.addSubscriberLocationDpa(d);
            } else {
                wait.addSubscriberLocationCpu(dev);
            }
            wait.start();
            DocaSyncEvent comp = dpaEvent();
            long rec = alloc(1024);
            d.kernelLaunchUpdateSet(null, 0, comp, 1, 1, KernelProgsStubs.HELLO_WORLD, rec); // runs
            comp.waitGt(0, ALL, BOUND);
            d.kernelLaunchUpdateSet(wait, 10, comp, 2, 1, KernelProgsStubs.HELLO_WORLD, rec);
            wait.updateSet(5); // looked at, not passed
            if (dpaCounter) {
                wait.destroy();
            } else {
                wait.stop();
                wait.destroy();
            }
            org.peerdirect.doca.DocaException f = d.kernelFailure();
            assertTrue(f != null && f.error() == org.peerdirect.doca.DocaError.DOCA_ERROR_BAD_STATE, String.valueOf(f));
            assertTrue(f.getMessage().contains("doca_sync_event " + wait.id()) && f.getMessage().contains("1 launch(es) waited"), f.getMessage());
            assertEquals(org.peerdirect.doca.DocaError.DOCA_ERROR_BAD_STATE, org.junit.jupiter.api.Assertions.assertThrows(
                    org.peerdirect.doca.DocaException.class, () -> d.kernelLaunchUpdateSet(null, 0, null, 0, 1, KernelProgsStubs.HELLO_WORLD, rec))
                    .error(), "later launches refused");
            assertEquals(1, load(rec + 8), "the waiting launch never ran");
            assertEquals(1, comp.get());
            assertEquals(List.of(), lab.crashes().stream().filter(l -> !l.startsWith("no ")).toList(), "the process lives on");
            assertEquals(42, d.rpc(KernelProgsStubs.ADD, 40L, 2L));
        }
    }

    /** A stop with launches queued (events that never pass): the DPA process, its heap and threads go, the watchdog ends, later updates kick nothing. */
    @Test
    void stopWithLaunchesQueuedLeavesNothing() throws Exception {
        context(DocaDpa.WaitComparison.GT);
        DocaSyncEvent wait = cpuEvent();
        List<String> before = lab.dpa().stream().filter(l -> !l.startsWith("eu")).toList();
        DocaDpa d = DocaDpa.create(dev);
        d.setApp(KernelProgsStubs.APP);
        d.start();
        long rec = d.memAlloc(1024);
        d.memset(rec, 0, 1024);
        for (int i = 0; i < 5; i++) {
            d.kernelLaunchUpdateSet(wait, 100 + i, null, 0, 1 + i % 2, KernelProgsStubs.HELLO_WORLD, rec);
        }
        wait.updateSet(50); // a kick, nothing passes
        assertEquals(5, d.kernelsPending());
        String name = "doca-dpa-dispatcher-" + d.flexioProcess().id();
        assertTrue(Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.getName().equals(name)), "the watchdog runs while launches wait");
        d.stop();
        assertTrue(Thread.getAllStackTraces().keySet().stream().noneMatch(t -> t.getName().equals(name) && t.isAlive()), "the watchdog ended");
        wait.updateSet(200); // the hooks went with the stop: no RPC to a process that is gone
        assertEquals(0, d.kernelsPending());
        d.destroy();
        assertEquals(before, lab.dpa().stream().filter(l -> !l.startsWith("eu")).toList(), "the stopped context's process, queue and threads are gone");
    }
}
