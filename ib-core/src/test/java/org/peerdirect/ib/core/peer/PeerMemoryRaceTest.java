package org.peerdirect.ib.core.peer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.ib.core.testing.Rig;
import org.peerdirect.ib.core.testing.TestDmaDevice.Mr;
import org.peerdirect.ib.core.testing.TestDmaDevice;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryStatistics;

/**
 * The races of the Peer-Direct contract, each repeated {@code -Dpeermem.stress.iterations} times
 * (2000 by default; set it higher for the long form). Every run ends with the rig's checks: no
 * IOMMU fault or violation, nothing mapped, pinned, leaked or left registered.
 */
class PeerMemoryRaceTest {

    static final int N = Integer.getInteger("peermem.stress.iterations", 2000);
    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;
    static final long JOIN_MS = 120_000;

    @TempDir
    Path tmp;
    Rig rig;

    @BeforeEach
    void up() {
        rig = new Rig(tmp, 128 << 20);
    }

    @AfterEach
    void down() {
        rig.close();
    }

    /** Runs the bodies on their own threads; rethrows the first failure; bounded in time. */
    static void concurrently(Runnable... bodies) throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> ts = new ArrayList<>();
        for (Runnable b : bodies) {
            ts.add(Thread.ofPlatform().start(() -> {
                try {
                    b.run();
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            }));
        }
        for (Thread t : ts) {
            t.join(JOIN_MS);
            assertFalse(t.isAlive(), "a racing thread hung: " + stack(t));
        }
        if (failure.get() != null) {
            throw new AssertionError("a racing thread failed", failure.get());
        }
    }

    private static String stack(Thread t) {
        StringBuilder sb = new StringBuilder(t.getName());
        for (StackTraceElement e : t.getStackTrace()) {
            sb.append("\n  at ").append(e);
        }
        return sb.toString();
    }

    static void assertBalanced(PeerMemoryStatistics s) {
        assertEquals(s.numAllocMrs(), s.numDeallocMrs(), "num_alloc_mrs == num_dealloc_mrs once all is released: " + s);
        assertEquals(s.numRegPages(), s.numDeregPages(), "every registered entry deregistered: " + s);
        assertEquals(s.numRegBytes(), s.numDeregBytes(), "every registered byte deregistered: " + s);
    }

    /** A DMA that must either fully work (data read back equals data written) or be refused as revoked. */
    static boolean writeAndReadBack(Mr mr, long va, int len, int seed) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(len);
            MemorySegment in = a.allocate(len);
            for (int i = 0; i < len; i++) {
                out.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i ^ seed));
            }
            try {
                mr.dmaWrite(va, out, 0, len);
                mr.dmaRead(va, in, 0, len);
            } catch (TestDmaDevice.DmaRefused e) {
                assertTrue(e.getMessage().contains("revoked"), e.getMessage());
                return false;
            }
            assertEquals(-1, out.mismatch(in), "a DMA that was not refused moved the right bytes");
            return true;
        }
    }

    @Test
    void invalidateAndFreeDuringRegistrationAndTraffic() throws Exception {
        ExamplePeerMemory mem = rig.client("gpu0", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(mem, true);
        int pid = rig.proc.pid();
        AtomicLong region = new AtomicLong(mem.alloc(pid, 1 << 16));
        AtomicBoolean done = new AtomicBoolean();
        AtomicInteger ok = new AtomicInteger();
        AtomicInteger refused = new AtomicInteger();
        AtomicInteger notClaimed = new AtomicInteger();
        concurrently(() -> {
            try {
                for (int i = 0; i < N; i++) {
                    long base = region.get();
                    int off = ThreadLocalRandom.current().nextInt(8) * 4096 + ThreadLocalRandom.current().nextInt(100);
                    Mr mr;
                    try {
                        mr = rig.dev.reg(rig.proc, base + off, 8000, RW);
                    } catch (KernelException e) {
                        notClaimed.incrementAndGet(); // the region was being freed or is gone: EFAULT
                        continue;
                    }
                    if (writeAndReadBack(mr, base + off, 8000, i)) {
                        ok.incrementAndGet();
                    } else {
                        refused.incrementAndGet();
                    }
                    rig.dev.dereg(mr);
                }
            } finally {
                done.set(true);
            }
        }, () -> {
            while (!done.get()) {
                long old = region.get();
                region.set(mem.alloc(pid, 1 << 16));
                mem.free(pid, old); // invalidates, then frees the frames: a late DMA would be a use-after-free
            }
        });
        mem.free(pid, region.get());
        assertTrue(ok.get() > 0, "some traffic went through: ok=" + ok + " refused=" + refused + " unclaimed=" + notClaimed);
        reg.unregister();
        assertBalanced(reg.statistics());
    }

    @Test
    void invalidationRacesDeregistration() throws Exception {
        ExamplePeerMemory mem = rig.client("gpu1", 4096, false);
        PeerMemoryRegistration reg = rig.controller.register(mem, true);
        long va = mem.alloc(rig.proc.pid(), 1 << 16);
        CyclicBarrier start = new CyclicBarrier(2);
        int invalidatedFirst = 0;
        for (int i = 0; i < N; i++) {
            Mr mr = rig.dev.reg(rig.proc, va, 1 << 16, RW);
            long t = mr.umem().ticket();
            concurrently(() -> {
                await(start);
                rig.dev.dereg(mr);
            }, () -> {
                await(start);
                reg.invalidate(t);
            });
            assertTrue(mr.invalidations() <= 1, "the driver function ran at most once");
            invalidatedFirst += (int) mr.invalidations();
        }
        PeerMemoryStatistics s = reg.statistics();
        assertEquals(N, s.numFreeCallbacks());
        assertEquals(N, s.numAllocMrs());
        assertBalanced(s);
        System.out.printf("invalidation won %d of %d races against deregistration%n", invalidatedFirst, N);
        reg.unregister();
    }

    @Test
    void unregisterRacesARegistrationInFlight() throws Exception {
        ExamplePeerMemory mem = rig.client("gpu2", 4096, false);
        long va = mem.alloc(rig.proc.pid(), 1 << 16);
        int rounds = Math.max(50, N / 4);
        for (int i = 0; i < rounds; i++) {
            Recording c = new Recording("leaving" + (i & 1), mem);
            PeerMemoryRegistration reg = rig.controller.register(c, true);
            AtomicReference<Mr> got = new AtomicReference<>();
            CyclicBarrier start = new CyclicBarrier(2);
            concurrently(() -> {
                await(start);
                try {
                    got.set(rig.dev.reg(rig.proc, va, 8192, RW));
                } catch (KernelException e) {
                    // unregistered first: the range is nobody's
                }
            }, () -> {
                await(start);
                try {
                    if (!reg.unregister(java.time.Duration.ofMillis(1))) {
                        Mr mr;
                        while ((mr = got.get()) == null) {
                            Thread.onSpinWait(); // the registration in flight completes
                        }
                        rig.dev.dereg(mr);
                        reg.unregister();
                    }
                } catch (InterruptedException e) {
                    throw new AssertionError(e);
                }
                c.unregistered = true;
            });
            if (got.get() != null && rig.dev.mrs().contains(got.get())) {
                throw new AssertionError("unregister returned while an MR still used the client");
            }
            assertEquals(0, c.callsAfterUnregister.get(), "no callback after unregister returned");
            assertBalanced(reg.statistics());
        }
    }

    @Test
    void twoClientsClaimingTheSameMemoryAndTheFirstLeavesMidway() throws Exception {
        ExamplePeerMemory mem = rig.client("shared", 4096, false);
        Recording first = new Recording("first", mem);
        Recording second = new Recording("second", mem);
        PeerMemoryRegistration r1 = rig.controller.register(first, true);
        PeerMemoryRegistration r2 = rig.controller.register(second, true);
        long va = mem.alloc(rig.proc.pid(), 1 << 16);
        AtomicBoolean firstGone = new AtomicBoolean();
        AtomicInteger toSecondAfterFirstLeft = new AtomicInteger();
        Runnable traffic = () -> {
            for (int i = 0; i < N / 2; i++) {
                boolean goneBefore = firstGone.get();
                Mr mr = rig.dev.reg(rig.proc, va + (i % 4) * 8192, 8192, RW);
                String owner = mr.umem().peerClientName();
                if (goneBefore) {
                    assertEquals("second", owner, "a client that finished unregistering is never asked again");
                    toSecondAfterFirstLeft.incrementAndGet();
                }
                rig.dev.dereg(mr);
            }
        };
        concurrently(traffic, traffic, () -> {
            while (first.calls.size() < 100) {
                Thread.onSpinWait();
            }
            r1.unregister();
            first.unregistered = true;
            firstGone.set(true);
        });
        assertEquals(0, first.callsAfterUnregister.get());
        assertTrue(second.calls.contains("acquire"));
        r2.unregister();
        assertBalanced(r1.statistics());
        assertBalanced(r2.statistics());
    }

    @Test
    void clientStoppedWithLiveRegistrationsWhileOthersDeregisterThem() throws Exception {
        ExamplePeerMemory mem = rig.client("gpu3", 65536, true);
        long va = mem.alloc(rig.proc.pid(), 1 << 20);
        int rounds = Math.max(20, N / 50);
        for (int round = 0; round < rounds; round++) {
            Recording c = new Recording("stopping", mem);
            PeerMemoryRegistration reg = rig.controller.register(c, true);
            List<Mr> mrs = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                mrs.add(rig.dev.reg(rig.proc, va + i * 65536L + 17, 40_000, RW));
            }
            AtomicBoolean unregistered = new AtomicBoolean();
            concurrently(() -> {
                reg.unregister();
                unregistered.set(true);
                c.unregistered = true;
            }, () -> {
                for (int i = 0; i < 16; i += 2) {
                    assertFalse(unregistered.get(), "unregister returned with live MRs");
                    rig.dev.dereg(mrs.get(i));
                }
            }, () -> {
                for (int i = 1; i < 16; i += 2) {
                    if (i % 3 == 0) {
                        mem.invalidate(rig.proc.pid(), va); // invalidations in the middle of it
                    }
                    rig.dev.dereg(mrs.get(i));
                }
            });
            assertTrue(unregistered.get());
            assertEquals(0, c.callsAfterUnregister.get());
            assertBalanced(reg.statistics());
        }
    }

    private static void await(CyclicBarrier b) {
        try {
            b.await();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }
}
