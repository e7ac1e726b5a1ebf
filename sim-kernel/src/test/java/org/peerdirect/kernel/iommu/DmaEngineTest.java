package org.peerdirect.kernel.iommu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.PinnedPages;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/**
 * The DMA engine's translate-once data path: a transfer is translated in one pass into runs
 * (segment, offset, length) and then copied, under the read lock(s) of its domain(s). Layout used
 * here: one {@code dma_map_sg} of 512 4 KiB pages in reverse frame order, one huge page (a 2 MiB
 * entry, on its 2 MiB IOVA boundary) and 16 more 4 KiB pages, so transfers cross 4 KiB
 * boundaries, the edges of the 2 MiB entry and the whole entry.
 */
class DmaEngineTest {

    private static final int SMALL_BEFORE = 512;
    private static final int SMALL_AFTER = 16;
    private static final int PAGES = SMALL_BEFORE + 512 + SMALL_AFTER;

    @TempDir
    Path tmp;

    private Mm mm;
    private Iommu iommu;
    private AddressSpace p;
    /** The mapped buffer: SMALL_BEFORE pages at {@code small}, the huge page at {@code huge}, SMALL_AFTER pages after the former. */
    private long small;
    private long huge;
    private PinnedPages smallPins;
    private PinnedPages hugePins;

    @AfterEach
    void audit() {
        if (iommu != null) {
            if (smallPins != null) {
                smallPins.unpin(true);
                hugePins.unpin(true);
            }
            IommuAudit a = iommu.audit();
            mm.close();
            assertEquals(PhysicalMemory.of(mm).nrFrames(), PhysicalMemory.of(mm).freeFrames(), "no frame leaked");
            assertTrue(a.clean(), "audit: " + a);
        }
    }

    private void setup() {
        mm = new Mm(32 << 20, true, tmp.resolve("swap"), 16 << 20);
        iommu = new Iommu(mm);
        p = mm.createProcess("app");
        p.setMemlockLimit(1L << 30);
        small = p.mmap((SMALL_BEFORE + SMALL_AFTER) * PAGE_SIZE);
        huge = p.mmap(0, Mm.HPAGE_SIZE, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "huge");
        smallPins = p.pinUserPages(small, (SMALL_BEFORE + SMALL_AFTER) * PAGE_SIZE, true);
        hugePins = p.pinUserPages(huge, Mm.HPAGE_SIZE, true);
    }

    /** The frames of the layout in IOVA order: small pages reversed, the huge page in order, the rest reversed. */
    private long[] layout() {
        long[] pfns = new long[PAGES];
        for (int i = 0; i < SMALL_BEFORE; i++) {
            pfns[i] = smallPins.pfn(SMALL_BEFORE - 1 - i);
        }
        for (int i = 0; i < 512; i++) {
            pfns[SMALL_BEFORE + i] = hugePins.pfn(i);
        }
        for (int i = 0; i < SMALL_AFTER; i++) {
            pfns[SMALL_BEFORE + 512 + i] = smallPins.pfn(SMALL_BEFORE + SMALL_AFTER - 1 - i);
        }
        return pfns;
    }

    /** The process address of the byte the layout maps at IOVA offset {@code off}. */
    private long vaOf(long off) {
        int page = (int) (off / PAGE_SIZE);
        long in = off % PAGE_SIZE;
        if (page < SMALL_BEFORE) {
            return small + (SMALL_BEFORE - 1 - page) * PAGE_SIZE + in;
        }
        if (page < SMALL_BEFORE + 512) {
            return huge + (page - SMALL_BEFORE) * PAGE_SIZE + in;
        }
        return small + (SMALL_BEFORE + SMALL_AFTER - 1 - (page - SMALL_BEFORE - 512)) * PAGE_SIZE + in;
    }

    private byte[] cpuRead(long off, int len) {
        byte[] b = new byte[len];
        for (int done = 0; done < len; ) {
            int n = (int) Math.min(len - done, PAGE_SIZE - (off + done) % PAGE_SIZE);
            p.read(vaOf(off + done), b, done, n);
            done += n;
        }
        return b;
    }

    private void cpuWrite(long off, byte[] b) {
        for (int done = 0; done < b.length; ) {
            int n = (int) Math.min(b.length - done, PAGE_SIZE - (off + done) % PAGE_SIZE);
            p.write(vaOf(off + done), b, done, n);
            done += n;
        }
    }

    /**
     * Seeded reads, writes and peer copies across 4 KiB boundaries, the 2 MiB entry's edges and
     * the whole entry move exactly their bytes (against the CPU's view of the same memory); the
     * 2 MiB entry is one run, so a transfer over it and a few bytes either side is three runs
     * (the neighbours' frames are elsewhere), and a transfer over reversed 4 KiB pages one run
     * per page.
     */
    @Test
    void transfersAcrossA2MiBEntryMoveExactlyTheirBytesInOneRunPerContiguousStretch() {
        setup();
        IommuDomain d = iommu.createDomain("dev0");
        IommuDomain peer = iommu.createDomain("dev1");
        long iova = d.dmaMapSg(layout(), DmaDirection.BIDIRECTIONAL);
        assertEquals(1, d.mappedSuperpages(), "the huge page is one 2 MiB entry");
        // the peer maps the same memory page by page in IOVA order of the layout, 4 KiB entries only
        long[] pfns = layout();
        long peerIova = peer.dmaMapSg(pfns.clone(), DmaDirection.BIDIRECTIONAL);
        Random rnd = new Random(0x7a115L);
        byte[] all = new byte[PAGES * (int) PAGE_SIZE];
        rnd.nextBytes(all);
        cpuWrite(0, all);
        long hugeOff = SMALL_BEFORE * PAGE_SIZE;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(all.length);
            // over the whole 2 MiB entry and 100 bytes either side: three runs
            d.read(iova + hugeOff - 100, buf, 0, Mm.HPAGE_SIZE + 200);
            assertEquals(3, DmaRuns.mine()[0].count, "the 2 MiB entry is one run between its neighbours' pieces");
            assertArrayEquals(cpuRead(hugeOff - 100, (int) Mm.HPAGE_SIZE + 200), buf.asSlice(0, Mm.HPAGE_SIZE + 200).toArray(ValueLayout.JAVA_BYTE));
            d.read(iova + 10, buf, 0, 8 * PAGE_SIZE);
            assertEquals(9, DmaRuns.mine()[0].count, "reversed frames: one run per page touched");
            for (int t = 0; t < 300; t++) {
                long off = pick(rnd);
                int len = (int) Math.min(PAGES * PAGE_SIZE - off, 1 + rnd.nextInt(rnd.nextBoolean() ? 3 * (int) PAGE_SIZE : (int) Mm.HPAGE_SIZE + 8192));
                switch (rnd.nextInt(3)) {
                    case 0 -> {
                        d.read(iova + off, buf, 0, len);
                        assertArrayEquals(cpuRead(off, len), buf.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE), "read at " + off + "+" + len);
                    }
                    case 1 -> {
                        byte[] data = new byte[len];
                        rnd.nextBytes(data);
                        buf.asSlice(0, len).copyFrom(MemorySegment.ofArray(data));
                        d.write(iova + off, buf, 0, len);
                        assertArrayEquals(data, cpuRead(off, len), "write at " + off + "+" + len);
                    }
                    default -> { // from the peer's 4 KiB view to the 2 MiB view, between places that need not overlap
                        long to = pick(rnd);
                        len = (int) Math.min(len, PAGES * PAGE_SIZE - Math.max(off, to));
                        if (Math.abs(to - off) < len) {
                            to = off; // an overlapping copy is not what this checks
                        }
                        byte[] want = cpuRead(off, len);
                        peer.copyTo(peerIova + off, d, iova + to, len);
                        assertArrayEquals(want, cpuRead(to, len), "copy " + off + " -> " + to + " +" + len);
                    }
                }
            }
        }
        d.dmaUnmap(iova, PAGES);
        peer.dmaUnmap(peerIova, PAGES);
    }

    /** An offset near a boundary of interest: a 4 KiB page edge, the 2 MiB entry's edges, anywhere. */
    private static long pick(Random rnd) {
        long hugeOff = SMALL_BEFORE * PAGE_SIZE;
        long off = switch (rnd.nextInt(4)) {
            case 0 -> hugeOff - rnd.nextInt(3 * (int) PAGE_SIZE);
            case 1 -> hugeOff + Mm.HPAGE_SIZE - rnd.nextInt(3 * (int) PAGE_SIZE);
            case 2 -> rnd.nextInt(PAGES) * PAGE_SIZE - rnd.nextInt(16);
            default -> (long) rnd.nextInt(PAGES * (int) PAGE_SIZE);
        };
        return Math.clamp(off, 0, PAGES * PAGE_SIZE - 1);
    }

    /**
     * Unmaps racing transfers at every point of a transfer, seeded: the unmapper starts before
     * the transfer, or (through the engine's probe, under the transfer's read lock) after its
     * translation and before its k-th copy. Once the unmap has returned, the test overwrites the
     * range's frames with a sentinel through the CPU. A write or peer copy must never reach those
     * frames after the unmap returned (the sentinel survives), a read must never return sentinel
     * bytes, and an unmap started mid-transfer must not return before the transfer ends (it waits
     * on the write lock). A transfer that started after the unmap faults and moves nothing.
     * Fails if the copy were not ordered against unmap (the runs used after the lock was let go).
     */
    @Test
    void anUnmapRacingATransferNeverLetsABytePassOnceItReturned() throws Exception {
        setup();
        IommuDomain d = iommu.createDomain("dev0");
        IommuDomain src = iommu.createDomain("dev1");
        // the peer copies from a buffer of its own (sentinel-free bytes), so a late copy would show
        long other = p.mmap(PAGES * PAGE_SIZE);
        Random rnd = new Random(0x5eedL);
        byte[] otherBytes = new byte[PAGES * (int) PAGE_SIZE];
        rnd.nextBytes(otherBytes);
        p.write(other, otherBytes, 0, otherBytes.length);
        PinnedPages otherPins = p.pinUserPages(other, PAGES * PAGE_SIZE, false);
        long srcIova = src.dmaMapSg(otherPins.pfns(), DmaDirection.TO_DEVICE);
        byte[] sentinel = new byte[(int) Mm.HPAGE_SIZE + 3 * (int) PAGE_SIZE];
        java.util.Arrays.fill(sentinel, (byte) 0x5a);
        int fired = 0;
        int faulted = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(sentinel.length);
            for (int t = 0; t < 120; t++) {
                long iova = d.dmaMapSg(layout(), DmaDirection.BIDIRECTIONAL);
                assertEquals(1, d.mappedSuperpages());
                long off = pick(rnd);
                int len = (int) Math.min(PAGES * PAGE_SIZE - off, 1 + rnd.nextInt(rnd.nextInt(4) == 0 ? sentinel.length : 5 * (int) PAGE_SIZE));
                int op = rnd.nextInt(3); // read, write, copy from the peer
                byte[] data = new byte[len];
                rnd.nextBytes(data);
                cpuWrite(off, data);
                buf.asSlice(0, len).fill((byte) 0);
                int at = rnd.nextInt(4) - 1; // -1: unmapped before the transfer; else before copy k (or after the last)
                AtomicBoolean unmapped = new AtomicBoolean();
                AtomicReference<Throwable> failure = new AtomicReference<>();
                Thread unmapper = new Thread(() -> {
                    try {
                        d.dmaUnmap(iova, PAGES);
                        unmapped.set(true);
                        cpuWrite(off, java.util.Arrays.copyOf(sentinel, len));
                    } catch (Throwable e) {
                        failure.set(e);
                    }
                }, "unmapper");
                if (at < 0) {
                    unmapper.start();
                    unmapper.join();
                }
                boolean[] started = {at < 0};
                d.engine.probe = k -> {
                    if (!started[0] && k >= at) {
                        started[0] = true;
                        unmapper.start();
                        Thread.State s;
                        while ((s = unmapper.getState()) != Thread.State.WAITING && s != Thread.State.TERMINATED) {
                            Thread.onSpinWait(); // until it parks on the write lock (or, wrongly, finishes)
                        }
                        assertFalse(unmapped.get(), "an unmap returned while a transfer was copying through its translation");
                    }
                };
                boolean fault = false;
                try {
                    switch (op) {
                        case 0 -> d.read(iova + off, buf, 0, len);
                        case 1 -> {
                            buf.asSlice(0, len).copyFrom(MemorySegment.ofArray(data));
                            d.write(iova + off, buf, 0, len);
                        }
                        default -> src.copyTo(srcIova + off, d, iova + off, len);
                    }
                } catch (IommuFault f) {
                    assertEquals(IommuFault.Kind.NOT_MAPPED, f.kind());
                    fault = true;
                } finally {
                    d.engine.probe = null;
                }
                if (!started[0]) { // the probe point lay past the last copy: the unmap follows the transfer
                    unmapper.start();
                }
                fired += at >= 0 && started[0] ? 1 : 0;
                unmapper.join();
                assertEquals(null, failure.get());
                assertEquals(at < 0, fault, "a transfer faults exactly when the unmap returned before it began");
                faulted += fault ? 1 : 0;
                assertArrayEquals(java.util.Arrays.copyOf(sentinel, len), cpuRead(off, len), "no byte reached the frames after the unmap returned");
                if (op == 0 && !fault) {
                    assertArrayEquals(data, buf.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE), "a read saw the mapping's bytes, not the sentinel");
                }
                if (fault) {
                    assertNotEquals(0, d.faultCount());
                }
                if (fault && op == 0) {
                    assertArrayEquals(new byte[len], buf.asSlice(0, len).toArray(ValueLayout.JAVA_BYTE), "a faulting read moved nothing");
                }
            }
        }
        assertTrue(fired >= 30 && faulted >= 20, "interleavings explored: " + fired + " mid-transfer unmaps, " + faulted + " unmaps before");
        src.dmaUnmap(srcIova, PAGES);
        otherPins.unpin(false);
    }
}
