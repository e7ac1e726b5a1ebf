package org.peerdirect.doca.syncevent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.DocaDpaContext;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.DocaLab;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * doca_sync_event on the CPU: configuration rules, update_set/update_add/get, wait_gt with a mask
 * (unsigned), the bounded wait's TIME_OUT, stop waking a waiter, concurrent updaters under seeded
 * interleavings, and a remote node reaching the counter of an exported event by an RDMA atomic.
 */
class DocaSyncEventTest {

    static final long ALL = -1L;

    @TempDir
    Path tmp;
    DocaLab lab;
    AddressSpace host;
    DocaDev dev;
    ExecutorService pool;

    @BeforeEach
    void up() {
        lab = new DocaLab(tmp, 2);
        host = lab.process("host");
        dev = lab.open(host, 0);
        pool = Executors.newCachedThreadPool();
    }

    @AfterEach
    void down() throws InterruptedException {
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS), "a test thread did not end");
        try {
            dev.close();
        } finally {
            lab.close();
        }
    }

    static DocaError status(Runnable r) {
        try {
            r.run();
            return DocaError.DOCA_SUCCESS;
        } catch (DocaException e) {
            return e.error();
        }
    }

    DocaSyncEvent cpuEvent() {
        DocaSyncEvent ev = DocaSyncEvent.create();
        ev.addPublisherLocationCpu(dev);
        ev.addSubscriberLocationCpu(dev);
        ev.start();
        return ev;
    }

    /** Spins (no sleep) until {@code ev} has {@code n} waiters inside a wait, or fails after 10 s. */
    static void awaitWaiters(DocaSyncEvent ev, int n) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (ev.waiting() != n) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no waiter parked: " + ev);
            }
            Thread.onSpinWait();
        }
    }

    /**
     * {@code doca_sync_event_cap_is_export_to_dpa_supported} answers per device: a BlueField-3
     * reports a DPA (an event there can have a DPA handle), a ConnectX-6 Dx reports none; null is
     * INVALID_VALUE; the query closes the context it opened.
     */
    @Test
    void exportToDpaIsSupportedOnADeviceWithADpaOnly(@TempDir Path cxTmp) {
        assertEquals(DocaError.DOCA_SUCCESS, DocaSyncEvent.capIsExportToDpaSupported(dev.asDevinfo()), "a BlueField-3");
        assertEquals(1, lab.core.openContexts(lab.devs.get(0)), "only the open DocaDev's context: the query closed its own");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, DocaSyncEvent.capIsExportToDpaSupported(null));
        try (DocaLab cx = new DocaLab(cxTmp, 1, org.peerdirect.hca.cx4.ConnectX4Device.DEVICE_CONNECTX6DX)) {
            org.peerdirect.doca.dev.DocaDevinfo info = cx.devinfos(cx.process("cx")).get(0);
            assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, DocaSyncEvent.capIsExportToDpaSupported(info), "a ConnectX-6 Dx has no DPA");
            assertEquals(0, cx.core.openContexts(cx.devs.get(0)), "the query closed its context");
        }
    }

    @Test
    void locationsAreConfiguredOnceAndBeforeStart() {
        DocaSyncEvent ev = DocaSyncEvent.create();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(ev::get), "get before start");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(ev::start), "no CPU location to place the counter in");
        ev.addPublisherLocationCpu(dev);
        assertEquals(DocaError.DOCA_ERROR_ALREADY_EXIST, status(ev::addPublisherLocationRemoteNet), "one publisher");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> ev.addSubscriberLocationCpu(null)));
        ev.addSubscriberLocationCpu(dev);
        assertEquals(DocaError.DOCA_ERROR_ALREADY_EXIST, status(() -> ev.addSubscriberLocationCpu(dev)), "one subscriber");
        ev.start();
        assertEquals(0, ev.get(), "a started event counts from 0");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(ev::start), "start twice");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> ev.addSubscriberLocationDpa(() -> dev)), "set after start");
        assertEquals(DocaError.DOCA_ERROR_IN_USE, status(dev::close), "the event holds its device");
        ev.stop();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> ev.updateAdd(1)), "update after stop");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(ev::stop));
        ev.destroy();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(ev::destroy), "double destroy");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(ev::get));
        assertEquals(0, host.pinnedPages(), "the counter's page was unpinned");
    }

    @Test
    void dpaLocationsAreAcceptedButTheirDataPathWaitsForFlexio() {
        DocaDpaContext dpa = () -> dev;
        DocaSyncEvent toDpa = DocaSyncEvent.create();
        toDpa.addPublisherLocationCpu(dev);
        toDpa.addSubscriberLocationDpa(dpa);
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(toDpa::start), "a DPA subscriber needs DPA memory");
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(() -> toDpa.getDpaHandle(dpa)));
        toDpa.destroy();

        DocaSyncEvent fromDpa = DocaSyncEvent.create();
        fromDpa.addPublisherLocationDpa(dpa);
        fromDpa.addSubscriberLocationCpu(dev);
        fromDpa.start();
        fromDpa.updateSet(3); // the host may still write the counter it subscribes to
        assertEquals(3, fromDpa.get());
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(() -> fromDpa.getDpaHandle(dpa)));
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(fromDpa::exportToRemoteNet), "the publisher is not remote");
        fromDpa.destroy();

        DocaSyncEvent cpu = cpuEvent();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> cpu.getDpaHandle(dpa)), "no DPA location");
        cpu.destroy();
    }

    /**
     * A bounded wait answers TIME_OUT when the value did not pass within the bound, even when it
     * passes by the time the waiter looks again after the bound, if no update went through the
     * event meanwhile: here the counter moves behind the event's back (a write that signals
     * nothing, as a lost wake-up is), so the sleeping waiter only looks again at its bound, and the
     * message says so. (A pass an update signalled, seen late, is a success.) Before the fix it returned there without TIME_OUT, and a lost
     * wake-up cost a whole bound unnoticed (note24 "Known flaky").
     */
    @Test
    void aBoundedWaitWhoseValuePassesOnlyUnseenEndsWithTimeOut() throws Exception {
        DocaSyncEvent ev = cpuEvent();
        ev.updateSet(1);
        long t0 = System.nanoTime();
        CompletableFuture<DocaException> w = new CompletableFuture<>();
        Thread waiter = Thread.ofPlatform().start(() -> w.complete(assertThrows(DocaException.class, () -> ev.waitGt(1, ALL, Duration.ofMillis(300)))));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (ev.waiting() == 0 || waiter.getState() != Thread.State.TIMED_WAITING) { // asleep on the event after its second look
            assertTrue(System.nanoTime() < deadline, "the waiter never slept in its wait");
            Thread.onSpinWait();
        }
        DocaLab.fill(host, ev.counterAddr(), 1, 7); // byte 0 = 7: the value passes 1, signalling nothing
        assertEquals(7, ev.get());
        DocaException e = w.get(10, TimeUnit.SECONDS);
        assertEquals(DocaError.DOCA_ERROR_TIME_OUT, e.error(),
                "the pass was not seen within the bound (nothing signalled it): TIME_OUT, not a success at the bound");
        assertTrue(e.getMessage().contains("holds only at the look after its 300 ms bound"), e.getMessage());
        String m = assertThrows(DocaException.class, () -> ev.waitGt(7, ALL, Duration.ofMillis(1))).getMessage();
        assertTrue(m.contains("did not hold within 1 ms"), m);
        assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(300), "the wait ran its bound");
        ev.updateSet(8); // a signalled update is seen at once
        ev.waitGt(7, ALL, Duration.ofSeconds(10));
        ev.destroy();
    }

    @Test
    void updatesAndMaskedUnsignedWaits() {
        DocaSyncEvent ev = cpuEvent();
        ev.updateSet(0x1_0000_0005L);
        assertEquals(0x1_0000_0005L, ev.updateAdd(10), "update_add fetches the value before");
        assertEquals(0x1_0000_000fL, ev.get());
        ev.waitGt(0xe, 0xffff_ffffL); // (v & mask) = 0xf > 0xe: returns at once
        DocaException t = assertThrows(DocaException.class, () -> ev.waitGt(0xf, 0xffff_ffffL, Duration.ofMillis(20)));
        assertEquals(DocaError.DOCA_ERROR_TIME_OUT, t.error(), "0xf is not greater than 0xf under the mask, though the value is");
        assertTrue(t.getMessage().contains("0xf"), t.getMessage());
        assertEquals(DocaError.DOCA_ERROR_TIME_OUT, status(() -> ev.waitGt(0x1_0000_000fL, ALL, Duration.ZERO)));
        ev.updateSet(-1L);
        ev.waitGt(Long.MAX_VALUE, ALL); // 0xffff_ffff_ffff_ffff > 0x7fff_ffff_ffff_ffff unsigned
        ev.waitGtYield(0xfffe, 0xffff);
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> ev.waitGt(0, ALL, Duration.ofSeconds(-1))));
        ev.waitGt(0xfffe, 0xffff, Duration.ofDays(365L * 1_000_000)); // a bound past a long of nanoseconds: satisfied, no overflow
        ev.destroy();
    }

    @Test
    void aWaiterWakesOnTheUpdateThatPassesItsThreshold() throws Exception {
        DocaSyncEvent ev = cpuEvent();
        Future<?> w = pool.submit(() -> ev.waitGt(9, ALL));
        awaitWaiters(ev, 1);
        ev.updateAdd(4);
        ev.updateSet(9);
        assertEquals(1, ev.waiting(), "9 is not greater than 9: still waiting");
        ev.updateAdd(1);
        w.get(10, TimeUnit.SECONDS);
        assertEquals(10, ev.get());
        ev.destroy();
    }

    @Test
    void stopAndDestroyEndTheWaitsUnderThem() throws Exception {
        DocaSyncEvent ev = cpuEvent();
        CompletableFuture<DocaError> w = CompletableFuture.supplyAsync(() -> status(() -> ev.waitGt(100, ALL)), pool);
        awaitWaiters(ev, 1);
        ev.stop();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, w.get(10, TimeUnit.SECONDS), "a stopped event ends its waits");
        ev.destroy();
        DocaSyncEvent ev2 = cpuEvent();
        CompletableFuture<DocaError> w2 = CompletableFuture.supplyAsync(() -> status(() -> ev2.waitGt(100, ALL)), pool);
        awaitWaiters(ev2, 1);
        ev2.destroy();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, w2.get(10, TimeUnit.SECONDS), "a destroyed event ends its waits");
    }

    /**
     * Seeded interleavings: 2..4 threads add seeded values at once (released together) while
     * waiters wait for thresholds below the total, one of them through a mask. update_add is atomic: sorted by the value each
     * add fetched, the adds chain from 0 to the total with no gap or overlap; every waiter returns.
     */
    @Test
    void concurrentUpdatersChainTheirAddsAndEveryWaiterReturns() throws Exception {
        for (long seed = 1; seed <= 25; seed++) {
            Random rnd = new Random(seed);
            DocaSyncEvent ev = cpuEvent();
            int threads = 2 + rnd.nextInt(3);
            int[][] adds = new int[threads][1 + rnd.nextInt(60)];
            long total = 0;
            for (int[] a : adds) {
                for (int i = 0; i < a.length; i++) {
                    a[i] = 1 + rnd.nextInt(1000);
                    total += a[i];
                }
            }
            List<Future<?>> waits = new ArrayList<>();
            for (int k = 0; k < 3; k++) {
                long thr = rnd.nextLong(total);
                waits.add(pool.submit(() -> ev.waitGt(thr, ALL, Duration.ofSeconds(20))));
            }
            long high = ~0xfffL; // a mask that keeps a monotonic counter monotonic: its 4 KiB multiples
            if ((total & high) != 0) {
                long thr = rnd.nextLong(total & high);
                waits.add(pool.submit(() -> ev.waitGt(thr, high, Duration.ofSeconds(20))));
            }
            CountDownLatch go = new CountDownLatch(1);
            List<Future<List<long[]>>> ups = new ArrayList<>();
            for (int[] a : adds) {
                ups.add(pool.submit(() -> {
                    go.await();
                    List<long[]> fetched = new ArrayList<>();
                    for (int v : a) {
                        fetched.add(new long[] {ev.updateAdd(v), v});
                    }
                    return fetched;
                }));
            }
            go.countDown();
            List<long[]> all = new ArrayList<>();
            for (Future<List<long[]>> f : ups) {
                all.addAll(f.get(20, TimeUnit.SECONDS));
            }
            for (Future<?> f : waits) {
                f.get(20, TimeUnit.SECONDS);
            }
            Collections.sort(all, (x, y) -> Long.compare(x[0], y[0]));
            long expect = 0;
            for (long[] fa : all) {
                assertEquals(expect, fa[0], "seed " + seed + ": the adds chain without gap or overlap");
                expect += fa[1];
            }
            assertEquals(total, expect, "seed " + seed);
            assertEquals(total, ev.get(), "seed " + seed);
            ev.destroy();
        }
    }

    @Test
    void concurrentSetsLeaveOneOfTheValuesSet() throws Exception {
        for (long seed = 1; seed <= 10; seed++) {
            Random rnd = new Random(seed);
            DocaSyncEvent ev = cpuEvent();
            List<Long> values = new ArrayList<>();
            CountDownLatch go = new CountDownLatch(1);
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                long v = rnd.nextLong();
                values.add(v);
                fs.add(pool.submit(() -> {
                    go.await();
                    ev.updateSet(v);
                    return null;
                }));
            }
            go.countDown();
            for (Future<?> f : fs) {
                f.get(10, TimeUnit.SECONDS);
            }
            assertTrue(values.contains(ev.get()), "seed " + seed + ": " + Long.toHexString(ev.get()) + " is one of the values set");
            ev.destroy();
        }
    }

    /**
     * A remote publisher: host B imports host A's exported event and reaches its counter by an RDMA
     * fetch-and-add, what DOCA RDMA's signal_add will do; A's wait (polling, the change comes by
     * DMA) sees it.
     */
    @Test
    void aRemoteNodeReachesAnExportedEventsCounterByRdma() throws Exception {
        DocaSyncEvent ev = DocaSyncEvent.create();
        ev.addPublisherLocationRemoteNet();
        ev.addSubscriberLocationCpu(dev);
        ev.start();
        assertEquals(DocaError.DOCA_SUCCESS, DocaSyncEvent.capIsExportToRemoteNetSupported(dev.asDevinfo()));
        byte[] export = ev.exportToRemoteNet();
        AddressSpace hostB = lab.process("host-b");
        DocaDev devB = lab.open(hostB, 1);
        DocaSyncEventRemoteNet remote = DocaSyncEventRemoteNet.createFromExport(devB, export);
        assertEquals(ev.counterAddr(), remote.addr());
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(() -> remote.getDpaHandle(() -> devB)));
        ev.updateSet(2);
        Future<?> w = pool.submit(() -> ev.waitGt(6, ALL, Duration.ofSeconds(20)));
        try (DocaLab.End a = new DocaLab.End(dev); DocaLab.End b = new DocaLab.End(devB)) {
            b.connect(a);
            IbvWc fa = b.post(IbvWrOpcode.ATOMIC_FETCH_AND_ADD, 8, remote.addr(), remote.rkey(), 5);
            assertEquals(IbvWcStatus.SUCCESS, fa.status, fa.toString());
            assertEquals(2, hostB.readLong(b.buf), "the atomic fetched the value the CPU set");
        }
        w.get(20, TimeUnit.SECONDS);
        assertEquals(7, ev.get());
        assertEquals(DocaError.DOCA_ERROR_TIME_OUT, status(() -> ev.waitGt(7, ALL, Duration.ofMillis(20))), "the polling wait is bounded too");
        byte[] bad = export.clone();
        bad[16] |= 4; // a misaligned counter address
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> DocaSyncEventRemoteNet.createFromExport(devB, bad)));
        assertEquals(DocaError.DOCA_ERROR_IN_USE, status(devB::close), "the imported handle holds its device");
        remote.destroy();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(remote::destroy));
        devB.close();
        ev.destroy();
    }
}
