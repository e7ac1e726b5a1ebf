package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.mm.Mm;

/**
 * The DPA window path's guarantee under a peer invalidation (DPA_MODEL.md §2.3 "Windows", §4
 * scenario 3): a window access is {@link HcaDevice#keyAccess} through the mkey (what the BlueField-3
 * firmware's {@code WindowPort} calls), and mlx5 revokes a peer MR's mkey by a UMR that frees it
 * ({@code mlx5r_umr_revoke_mr}: {@code free = 1}, the UMR PD). When that UMR returns, no window DMA
 * through the mkey may be in flight and none may start: the invalidation callback returns right after
 * it and the peer frees the memory.
 *
 * <p>An interleaving test, seeded: each seed picks a transfer of 2 to 8 pages (a window writeback or
 * fill, one DMA per page), read or write, and the page at which the revoking UMR is issued while that
 * page's DMA is held in the port (or, for -1, before the transfer starts). The DMA is held by a latch,
 * not a sleep; the UMR is seen waiting by its thread state. Checks: the UMR does not return while the
 * held DMA is in flight; the transfer admitted before it completes whole and no DMA begins after the
 * UMR returned; after it returns, the next access is refused at the key with no byte moved (the port
 * counts every call); a transfer that starts after it moves nothing. The mutant that lets go of the
 * entry's read lock between pages (the UMR slipping in mid-transfer) fails seeds 4 and 42.
 */
class KeyAccessRevokeRaceTest extends EngineRig {

    static final long RW = HcaDevice.MTT_READ | HcaDevice.MTT_WRITE;

    /** A port that counts its data transfers and holds the one numbered {@link #holdAt} until released. */
    static final class Holding extends PageFaultTest.Forwarding {
        final AtomicInteger calls = new AtomicInteger();
        volatile int holdAt = -1;
        volatile CountDownLatch inDma = new CountDownLatch(1);
        volatile CountDownLatch release = new CountDownLatch(1);

        Holding(DmaPort port) {
            super(port);
        }

        private void step() {
            int n = calls.getAndIncrement();
            if (n == holdAt) {
                inDma.countDown();
                try {
                    assertTrue(release.await(10, TimeUnit.SECONDS), "released within 10 s");
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }

        @Override
        public void read(long iova, MemorySegment dst, long off, long len) {
            step();
            super.read(iova, dst, off, len);
        }

        @Override
        public void write(long iova, MemorySegment src, long off, long len) {
            step();
            super.write(iova, src, off, len);
        }
    }

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {1, 2, 3, 4, 5, 6, 7, 8, 42, 4242})
    void noWindowDmaThroughAnMkeyAfterItsRevokingUmrReturned(long seed) throws Exception {
        Random r = new Random(seed);
        AtomicReference<Holding> port = new AtomicReference<>();
        Side a = new Side(0, p -> {
            Holding h = new Holding(p);
            port.set(h);
            return h;
        });
        Holding h = port.get();
        int pages = 2 + r.nextInt(7);
        boolean write = r.nextBoolean();
        int revokeAt = r.nextInt(pages + 1) - 1; // -1: before the transfer; else while page revokeAt's DMA is in flight
        long[] mtt = new long[16];
        for (int i = 0; i < 16; i++) {
            mtt[i] = a.iova + (long) i * Mm.PAGE_SIZE | RW;
        }
        // a peer MR's mkey as mlx5 makes it: UMR-enabled, per-page translations, all present
        int key = a.dev.createUmrMpt(1, a.va, 16 * Mm.PAGE_SIZE, ALL, 12, 16, false, mtt, 16, 0, false);
        byte[] host = new byte[pages * 4096];
        r.nextBytes(host);
        proc.write(a.va, host, 0, host.length);
        MemorySegment buf = MemorySegment.ofArray(new byte[host.length]);
        byte[] sent = new byte[host.length];
        r.nextBytes(sent);
        MemorySegment.copy(MemorySegment.ofArray(sent), 0, buf, 0, sent.length);
        String where = String.format("seed %d: %s of %d pages, revoke at %d", seed, write ? "write" : "read", pages, revokeAt);

        if (revokeAt < 0) {
            revoke(a, key);
            int before = h.calls.get();
            assertThrows(IllegalStateException.class, () -> a.dev.keyAccess(key, a.va, buf, 0, host.length, write), where);
            assertEquals(before, h.calls.get(), "refused at the key, no DMA: " + where);
        } else {
            h.holdAt = h.calls.get() + revokeAt;
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread dma = Thread.ofPlatform().start(() -> {
                try {
                    a.dev.keyAccess(key, a.va, buf, 0, host.length, write);
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
            assertTrue(h.inDma.await(10, TimeUnit.SECONDS), "page " + revokeAt + "'s DMA in flight: " + where);
            CountDownLatch revoked = new CountDownLatch(1);
            AtomicInteger atReturn = new AtomicInteger(-1);
            Thread umr = Thread.ofPlatform().start(() -> {
                revoke(a, key);
                atReturn.set(h.calls.get()); // the DMAs begun when the UMR returned
                revoked.countDown();
            });
            // the UMR blocks on the entry's write lock while the held DMA holds the read lock
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (umr.getState() != Thread.State.WAITING && revoked.getCount() != 0) {
                assertTrue(System.nanoTime() < deadline, "the UMR reached the entry's lock: " + where);
                Thread.onSpinWait();
            }
            assertEquals(1, revoked.getCount(), "the revoking UMR does not return while a window DMA through the mkey is in flight: " + where);
            h.release.countDown();
            dma.join(10_000);
            umr.join(10_000);
            assertEquals(0, revoked.getCount(), where);
            assertNull(failed.get(), "the transfer admitted before the UMR completes: " + where);
            assertEquals(h.calls.get(), atReturn.get(), "no DMA began after the revoking UMR returned: " + where);
            assertEquals(pages, h.calls.get() - (h.holdAt - revokeAt), "one DMA per page, all of them: " + where);
            if (write) {
                byte[] got = new byte[host.length];
                proc.read(a.va, got, 0, got.length);
                assertArrayEquals(sent, got, "the whole writeback landed before the revoke returned: " + where);
            } else {
                assertArrayEquals(host, buf.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE), "the whole fill read: " + where);
            }
            // after the UMR returned: the next window access is refused at the key, no byte moves
            int after = h.calls.get();
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> a.dev.keyAccess(key, a.va, buf, 0, 4096, write), where);
            assertTrue(e.getMessage().contains("revoked"), e.getMessage());
            assertEquals(after, h.calls.get(), "no DMA after the revoking UMR returned: " + where);
        }
        assertNull(a.dev.keyInfo(key), "a freed mkey configures no window: " + where);
        a.dev.freeMpt(key);
    }

    /** {@code mlx5r_umr_revoke_mr}: free, moved to another PD. */
    static void revoke(Side s, int key) {
        UmrWqe u = new UmrWqe();
        u.mkey = key;
        u.mask = UmrWqe.MASK_FREE | UmrWqe.MASK_PD;
        u.free = true;
        u.pdn = 2;
        assertEquals(Outcome.SUCCESS, s.dev.mpt(key).umr(u, new long[0], 0, 0));
    }
}
