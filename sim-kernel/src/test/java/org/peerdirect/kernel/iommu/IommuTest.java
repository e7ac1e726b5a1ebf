package org.peerdirect.kernel.iommu;

import org.peerdirect.kernel.mm.internal.PhysicalMemory;

import org.peerdirect.kernel.dma.DmaDirection;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.HmmRange;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.MmuIntervalNotifier;
import org.peerdirect.kernel.mm.PinnedPages;

class IommuTest {

    @TempDir
    Path tmp;

    private Mm mm;
    private Iommu iommu;

    private AddressSpace setup() {
        mm = new Mm(32 << 20, true, tmp.resolve("swap"), 16 << 20);
        iommu = new Iommu(mm);
        return mm.createProcess("app");
    }

    @AfterEach
    void audit() {
        if (iommu != null) {
            IommuAudit a = iommu.audit();
            mm.close();
            assertEquals(PhysicalMemory.of(mm).nrFrames(), PhysicalMemory.of(mm).freeFrames(), "no frame leaked");
            assertTrue(a.violationFree() || expectViolation, "audit: " + a);
        }
    }

    private boolean expectViolation;

    @Test
    void peerToPeerCopyBetweenTwoDomainsIsAllOrNothing() {
        AddressSpace p = setup();
        IommuDomain src = iommu.createDomain("mlx4_0");
        IommuDomain dst = iommu.createDomain("mlx4_1");
        long a = p.mmap(4 * PAGE_SIZE);
        long b = p.mmap(4 * PAGE_SIZE);
        byte[] data = new byte[3 * (int) PAGE_SIZE];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 7);
        }
        p.write(a + 100, data, 0, data.length);
        PinnedPages pa = p.pinUserPages(a, 4 * PAGE_SIZE, true);
        PinnedPages pb = p.pinUserPages(b, 4 * PAGE_SIZE, true);
        long ia = src.dmaMapSg(pa.pfns(), DmaDirection.BIDIRECTIONAL);
        long ib = dst.dmaMapSg(pb.pfns(), DmaDirection.BIDIRECTIONAL);
        src.copyTo(ia + 100, dst, ib + 50, data.length); // unaligned on both sides, across pages
        byte[] back = new byte[data.length];
        p.read(b + 50, back, 0, back.length);
        assertArrayEquals(data, back);
        assertEquals(data.length, src.bytesRead());
        assertEquals(data.length, dst.bytesWritten());
        // the destination's last page unmapped: the whole copy is refused, nothing moves
        byte[] before = new byte[back.length];
        p.read(b + 50, before, 0, before.length);
        p.write(a + 100, new byte[data.length], 0, data.length);
        dst.dmaUnmap(ib + 3 * PAGE_SIZE, 1);
        assertThrows(IommuFault.class, () -> src.copyTo(ia + 100, dst, ib + 50, data.length)); // ends in the unmapped page
        p.read(b + 50, back, 0, back.length);
        assertArrayEquals(before, back, "a faulting DMA moved nothing");
        assertEquals(1, dst.faultCount());
        src.dmaUnmap(ia, 4);
        dst.dmaUnmap(ib, 3);
        pa.unpin(false);
        pb.unpin(true);
    }

    /**
     * Transfers copy run by run, merging pages whose frames follow on (on both sides). Mappings
     * here are shuffled runs of 1 to 4 consecutive frames, so runs start and end everywhere; 600
     * seeded transfers (copyTo, loopback copy, read, write) at random offsets and lengths must
     * each move exactly the bytes a page-by-page model moves.
     */
    @Test
    void transfersOverShuffledFrameRunsMoveExactlyTheirBytes() {
        AddressSpace p = setup();
        int npages = 48;
        long va = p.mmap(npages * PAGE_SIZE);
        java.util.Random rnd = new java.util.Random(0x5eed);
        byte[] init = new byte[(int) (npages * PAGE_SIZE)];
        rnd.nextBytes(init);
        p.write(va, init, 0, init.length);
        PinnedPages pin = p.pinUserPages(va, npages * PAGE_SIZE, true);
        IommuDomain[] doms = {iommu.createDomain("dev0"), iommu.createDomain("dev1")};
        int[][] perm = new int[2][];
        long[] iova = new long[2];
        for (int d = 0; d < 2; d++) {
            java.util.List<int[]> runs = new java.util.ArrayList<>();
            for (int i = 0; i < npages;) {
                int n = Math.min(npages - i, 1 + rnd.nextInt(4));
                runs.add(java.util.stream.IntStream.range(i, i + n).toArray());
                i += n;
            }
            java.util.Collections.shuffle(runs, rnd);
            perm[d] = runs.stream().flatMapToInt(java.util.Arrays::stream).toArray();
            long[] pfns = java.util.Arrays.stream(perm[d]).mapToLong(pin::pfn).toArray();
            iova[d] = doms[d].dmaMapSg(pfns, DmaDirection.BIDIRECTIONAL);
        }
        byte[] model = init.clone(); // by the process's page index
        java.util.function.BiFunction<Integer, Long, Integer> at = (d, off) -> (int) (perm[d][(int) (off >>> 12)] * PAGE_SIZE + (off & 4095));
        long span = npages * PAGE_SIZE;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(span);
            for (int t = 0; t < 600; t++) {
                int sd = rnd.nextInt(2);
                int dd = rnd.nextInt(2);
                long len = 1 + rnd.nextInt(rnd.nextBoolean() ? 200 : (int) (12 * PAGE_SIZE));
                long so = (long) (rnd.nextDouble() * (span - len));
                long to = (long) (rnd.nextDouble() * (span - len));
                switch (rnd.nextInt(3)) {
                    case 0 -> { // device to device (or loopback); overlapping memory is undefined for DMA: skipped
                        java.util.BitSet srcBytes = new java.util.BitSet();
                        for (int j = 0; j < len; j++) {
                            srcBytes.set(at.apply(sd, so + j));
                        }
                        final long fto = to;
                        if (java.util.stream.LongStream.range(0, len).anyMatch(j -> srcBytes.get(at.apply(dd, fto + j)))) {
                            continue;
                        }
                        byte[] tmpb = new byte[(int) len];
                        for (int j = 0; j < len; j++) {
                            tmpb[j] = model[at.apply(sd, so + j)];
                        }
                        for (int j = 0; j < len; j++) {
                            model[at.apply(dd, to + j)] = tmpb[j];
                        }
                        doms[sd].copyTo(iova[sd] + so, doms[dd], iova[dd] + to, len);
                    }
                    case 1 -> { // read into a device buffer
                        doms[sd].read(iova[sd] + so, buf, to, len);
                        for (int j = 0; j < len; j++) {
                            assertEquals(model[at.apply(sd, so + j)], buf.get(java.lang.foreign.ValueLayout.JAVA_BYTE, to + j),
                                    "transfer " + t + ": byte " + j + " read");
                        }
                    }
                    default -> { // write from a device buffer
                        for (int j = 0; j < len; j++) {
                            byte v = (byte) rnd.nextInt();
                            buf.set(java.lang.foreign.ValueLayout.JAVA_BYTE, so + j, v);
                            model[at.apply(dd, to + j)] = v;
                        }
                        doms[dd].write(iova[dd] + to, buf, so, len);
                    }
                }
            }
        }
        byte[] got = new byte[init.length];
        p.read(va, got, 0, got.length);
        assertArrayEquals(model, got, "memory after 600 transfers equals the page-by-page model");
        for (int d = 0; d < 2; d++) {
            doms[d].dmaUnmap(iova[d], npages);
        }
        pin.unpin(true);
    }

    @Test
    void deviceSeesWhatTheCpuWroteThroughPinnedMappings() {
        AddressSpace p = setup();
        IommuDomain d = iommu.createDomain("mlx5_0");
        long a = p.mmap(4 * PAGE_SIZE);
        p.writeLong(a + PAGE_SIZE + 8, 0xfeedL);
        PinnedPages pins = p.pinUserPages(a, 4 * PAGE_SIZE, true);
        long iova = d.dmaMapSg(pins.pfns(), DmaDirection.BIDIRECTIONAL);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(16);
            d.read(iova + PAGE_SIZE, buf, 0, 16);
            assertEquals(0xfeedL, buf.get(ValueLayout.JAVA_LONG_UNALIGNED, 8));
            buf.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 0xabcdL);
            d.write(iova + 3 * PAGE_SIZE - 4, buf, 0, 8); // across a page boundary
        }
        assertEquals(0xabcdL, p.readLong(a + 3 * PAGE_SIZE - 4));
        assertEquals(0, d.fetchAdd(iova + 64, 5), "fetch-add returns the old value");
        assertEquals(5, d.compareAndSwap(iova + 64, 5, 9));
        assertEquals(9, p.readLong(a + 64));
        assertEquals(4, d.mappedPages());
        d.dmaUnmap(iova, 4);
        pins.unpin(true);
        assertEquals(0, iommu.audit().liveMappings());
    }

    /**
     * A small device read (the optimistic path of {@link IommuDomain#read}) racing an unmap, a
     * reuse of the frames by someone else and a new mapping: every read returns the bytes the
     * mapping held (never the other user's, never a mix) or faults, and a faulting read leaves
     * the buffer as it was. Reads cross the page boundary, so both translations are raced.
     */
    @Test
    void aSmallReadRacingUnmapAndReuseSeesTheMappedBytesOrFaults() throws Exception {
        setup();
        IommuDomain d = iommu.createDomain("mlx5_0");
        long pfn = mm.allocPages(1);
        MemorySegment frames = mm.pageAddress(pfn, 1);
        frames.fill((byte) 0xAA);
        AtomicLong iova = new AtomicLong(d.dmaMapSg(new long[] {pfn, pfn + 1}, DmaDirection.TO_DEVICE));
        AtomicBoolean done = new AtomicBoolean();
        Thread remapper = Thread.ofPlatform().name("remapper").start(() -> {
            try {
                for (int i = 0; i < 20_000; i++) {
                    d.dmaUnmap(iova.get(), 2);
                    frames.fill((byte) 0xCC); // the frames' next user
                    frames.fill((byte) 0xAA);
                    iova.set(d.dmaMapSg(new long[] {pfn, pfn + 1}, DmaDirection.TO_DEVICE));
                }
            } finally {
                done.set(true);
            }
        });
        long good = 0;
        long faulted = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(64);
            while (!done.get() || good == 0) {
                buf.fill((byte) 0x11);
                try {
                    d.read(iova.get() + PAGE_SIZE - 32, buf, 0, 64);
                } catch (IommuFault f) {
                    assertEquals(IommuFault.Kind.NOT_MAPPED, f.kind());
                    for (long i = 0; i < 64; i++) {
                        assertEquals((byte) 0x11, buf.get(ValueLayout.JAVA_BYTE, i), "a faulting read moves nothing (byte " + i + ")");
                    }
                    faulted++;
                    continue;
                }
                for (long i = 0; i < 64; i++) {
                    assertEquals((byte) 0xAA, buf.get(ValueLayout.JAVA_BYTE, i), "byte " + i + " of a read that did not fault");
                }
                good++;
            }
        }
        remapper.join(TimeUnit.SECONDS.toMillis(30));
        assertFalse(remapper.isAlive(), "the remapper ended");
        assertTrue(good > 0, "reads succeeded: " + good + ", faulted: " + faulted);
        assertEquals(good * 64, d.bytesRead(), "only the reads that succeeded count");
        d.dmaUnmap(iova.get(), 2);
        mm.freePages(pfn, 1);
    }

    @Test
    void accessesOutsideMappingsFaultAndMoveNothing() {
        AddressSpace p = setup();
        IommuDomain d = iommu.createDomain("mlx4_0");
        long a = p.mmap(2 * PAGE_SIZE);
        p.writeLong(a + PAGE_SIZE - 8, 1);
        PinnedPages pins = p.pinUserPages(a, PAGE_SIZE, false);
        long iova = d.dmaMapPage(pins.pfn(0), DmaDirection.TO_DEVICE);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(16);
            buf.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 77);
            IommuFault f = assertThrows(IommuFault.class, () -> d.write(iova, buf, 0, 8));
            assertEquals(IommuFault.Kind.PERMISSION, f.kind());
            f = assertThrows(IommuFault.class, () -> d.read(iova + PAGE_SIZE - 8, buf, 0, 16));
            assertEquals(IommuFault.Kind.NOT_MAPPED, f.kind(), "the second page is not mapped");
            assertEquals(0, buf.get(ValueLayout.JAVA_LONG_UNALIGNED, 8), "a faulting DMA moves nothing");
            assertThrows(IommuFault.class, () -> d.read(0x1234, buf, 0, 8));
        }
        assertEquals(1, p.readLong(a + PAGE_SIZE - 8));
        assertEquals(3, iommu.audit().faults());
        assertThrows(KernelException.class, () -> d.dmaUnmap(iova + PAGE_SIZE, 1));
        assertThrows(KernelException.class, () -> d.fetchAdd(iova + 4, 1), "misaligned atomic");
        d.dmaUnmap(iova, 1);
        assertThrows(KernelException.class, () -> d.dmaUnmap(iova, 1), "double unmap");
        pins.unpin(false);
        assertThrows(KernelException.class, () -> iommu.createDomain("mlx4_0"));
    }

    /**
     * A descriptor write (a CQE, an EQE) lands whole in one page with its last word, and is
     * refused by name, moving nothing, when misaligned, not whole words, crossing its page, or
     * aimed at a page without the write right.
     */
    @Test
    void aDescriptorWriteLandsWholeOrIsRefusedMovingNothing() {
        AddressSpace p = setup();
        IommuDomain d = iommu.createDomain("mlx5_0");
        long a = p.mmap(PAGE_SIZE);
        p.writeLong(a, 0); // present
        PinnedPages pins = p.pinUserPages(a, PAGE_SIZE, true);
        long iova = d.dmaMapPage(pins.pfn(0), DmaDirection.BIDIRECTIONAL);
        long ro = d.dmaMapPage(pins.pfn(0), DmaDirection.TO_DEVICE);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cqe = arena.allocate(64);
            for (int i = 0; i < 64; i++) {
                cqe.set(ValueLayout.JAVA_BYTE, i, (byte) (i + 1));
            }
            d.writeDescriptor(iova + PAGE_SIZE - 64, cqe, 0, 64);
            for (int i = 0; i < 64; i += 8) {
                assertEquals(cqe.get(ValueLayout.JAVA_LONG_UNALIGNED, i), p.readLong(a + PAGE_SIZE - 64 + i), "word at " + i);
            }
            String[] refused = {
                    msg(() -> d.writeDescriptor(iova + 4, cqe, 0, 64)),
                    msg(() -> d.writeDescriptor(iova, cqe, 0, 60)),
                    msg(() -> d.writeDescriptor(iova + PAGE_SIZE - 32, cqe, 0, 64)),
                    msg(() -> d.writeDescriptor(iova, cqe, 8, 64)),
            };
            for (String m : refused) {
                assertTrue(m.contains("descriptor write") || m.contains("outside"), m);
            }
            IommuFault f = assertThrows(IommuFault.class, () -> d.writeDescriptor(ro + 64, cqe, 0, 64));
            assertEquals(IommuFault.Kind.PERMISSION, f.kind());
            for (int i = 0; i < 64; i += 8) {
                assertEquals(0, p.readLong(a + i), "nothing moved at " + i);
            }
        }
        d.dmaUnmap(iova, 1);
        d.dmaUnmap(ro, 1);
        pins.unpin(true);
    }

    private static String msg(org.junit.jupiter.api.function.Executable e) {
        return assertThrows(KernelException.class, e).getMessage();
    }

    /**
     * The IOVA-range API ({@code dma_iova_try_alloc}/{@code link}/{@code unlink}/{@code free}):
     * a range maps nothing until linked, its pages are linked and unlinked in runs, a device sees
     * exactly the linked pages, every misuse is refused with the page named and changes nothing,
     * and a range never freed is reported as leaked with the domain.
     */
    @Test
    void anIovaRangeMapsOnlyItsLinkedPagesAndRefusesMisuse() {
        AddressSpace p = setup();
        IommuDomain d = iommu.createDomain("mlx5_0");
        long a = p.mmap(4 * PAGE_SIZE);
        p.writeLong(a + 2 * PAGE_SIZE, 0x2222L);
        PinnedPages pins = p.pinUserPages(a, 4 * PAGE_SIZE, true);
        long base = d.dmaIovaTryAlloc(8 * PAGE_SIZE);
        assertTrue(base >= IommuDomain.IOVA_BASE);
        assertEquals(0, d.mappedPages(), "a range maps nothing");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(8);
            assertEquals(IommuFault.Kind.NOT_MAPPED, assertThrows(IommuFault.class, () -> d.read(base, buf, 0, 8)).kind());
            long[] two = {pins.pfn(2), pins.pfn(3)};
            d.dmaIovaLink(base + 5 * PAGE_SIZE, two, 2, DmaDirection.BIDIRECTIONAL);
            assertEquals(2, d.mappedPages());
            d.read(base + 5 * PAGE_SIZE, buf, 0, 8);
            assertEquals(0x2222L, buf.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            KernelException twice = assertThrows(KernelException.class, () -> d.dmaIovaLink(base + 6 * PAGE_SIZE, two, 1, DmaDirection.BIDIRECTIONAL));
            assertTrue(twice.getMessage().contains("already linked"), twice.getMessage());
            KernelException outside = assertThrows(KernelException.class, () -> d.dmaIovaLink(base + 7 * PAGE_SIZE, two, 2, DmaDirection.BIDIRECTIONAL));
            assertTrue(outside.getMessage().contains("page 1 of 2 is not in a range"), outside.getMessage());
            assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> d.dmaUnmap(base + 5 * PAGE_SIZE, 1)).errno(),
                    "dma_unmap is not for linked pages");
            assertEquals(KernelException.Errno.EBUSY, assertThrows(KernelException.class, () -> d.dmaIovaFree(base, 8 * PAGE_SIZE)).errno(),
                    "a range with linked pages is not freed");
            assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> d.dmaIovaFree(base, 4 * PAGE_SIZE)).errno(),
                    "only the whole range is freed");
            KernelException notLinked = assertThrows(KernelException.class, () -> d.dmaIovaUnlink(base + 4 * PAGE_SIZE, 2));
            assertTrue(notLinked.getMessage().contains("page 0 of 2 is not linked"), notLinked.getMessage());
            assertEquals(2, d.mappedPages(), "refusals change nothing");
            d.dmaIovaUnlink(base + 5 * PAGE_SIZE, 2);
            assertEquals(0, d.mappedPages());
            assertEquals(IommuFault.Kind.NOT_MAPPED, assertThrows(IommuFault.class, () -> d.read(base + 5 * PAGE_SIZE, buf, 0, 8)).kind(),
                    "no DMA through an unlinked page");
            d.dmaIovaLink(base, pins.pfns(), 4, DmaDirection.TO_DEVICE);
            d.dmaIovaUnlink(base, 4);
        }
        d.dmaIovaFree(base, 8 * PAGE_SIZE);
        assertThrows(KernelException.class, () -> d.dmaIovaFree(base, 8 * PAGE_SIZE), "a range is freed once");
        assertEquals(-1, d.dmaIovaTryAlloc((long) (IommuDomain.IOVA_RANGE_MAX_PAGES + 1) * PAGE_SIZE), "too large: the caller maps page by page");
        long leaked = d.dmaIovaTryAlloc(3 * PAGE_SIZE);
        d.dmaIovaLink(leaked, pins.pfns(), 1, DmaDirection.BIDIRECTIONAL);
        assertEquals(3, iommu.destroyDomain(d), "a range never freed is leaked, linked or not");
        d.dmaIovaFree(leaked, 3 * PAGE_SIZE); // the umem of a device gone releases after the domain: nothing left to give back
        assertEquals(-1, d.dmaIovaTryAlloc(PAGE_SIZE), "no range from a destroyed domain (the caller's first map names the domain)");
        pins.unpin(true);
        assertEquals(3, iommu.leakedAtDestroy());
    }

    /**
     * A huge page mapped whole on a 2 MiB IOVA boundary takes one 2 MiB entry (one DMA reference,
     * on its head frame), through {@code dma_map_sg} and through an IOVA range alike; DMA crosses
     * it as 512 pages; unmapping part of it splits it into 4 KiB entries, leaving the rest
     * mapped; a range of fewer than 512 pages, or frames that are not one huge page, stay 4 KiB.
     */
    @Test
    void aWholeHugePageTakesOne2MiBEntryAndSplitsOnAPartialUnmap() {
        AddressSpace p = setup();
        IommuDomain d = iommu.createDomain("mlx5_0");
        PhysicalMemory phys = PhysicalMemory.of(mm);
        long h = p.mmap(0, Mm.HPAGE_SIZE, org.peerdirect.kernel.mm.Vma.PROT_READ | org.peerdirect.kernel.mm.Vma.PROT_WRITE,
                org.peerdirect.kernel.mm.Vma.Kind.HUGETLB, "huge");
        p.writeLong(h + 7 * PAGE_SIZE + 8, 0x77L);
        p.writeLong(h + 511 * PAGE_SIZE + 64, 0x511L);
        PinnedPages pins = p.pinUserPages(h, Mm.HPAGE_SIZE, true);
        long head = pins.pfn(0);
        d.dmaMapPage(pins.pfn(3), DmaDirection.TO_DEVICE); // a 4 KiB mapping first: the next range must still start on 2 MiB
        long iova = d.dmaMapSg(pins.pfns(), DmaDirection.BIDIRECTIONAL);
        assertEquals(0, (iova - IommuDomain.IOVA_BASE) % Mm.HPAGE_SIZE, "a 2 MiB range starts on a 2 MiB IOVA boundary");
        assertEquals(1, d.mappedSuperpages());
        assertEquals(513, d.mappedPages(), "a 2 MiB entry counts its 512 pages");
        assertEquals(1, phys.dmaRefs(head), "one reference for the huge page, on its head");
        assertEquals(1, phys.dmaRefs(head + 3), "the 4 KiB mapping's own");
        assertEquals(0, phys.dmaRefs(head + 7));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(2 * PAGE_SIZE);
            d.read(iova + 7 * PAGE_SIZE + 8, buf, 0, 8);
            assertEquals(0x77L, buf.get(ValueLayout.JAVA_LONG_UNALIGNED, 0), "a small read inside the 2 MiB entry");
            buf.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 0x99L);
            d.write(iova + 510 * PAGE_SIZE + PAGE_SIZE - 4, buf, 0, 8); // across two pages of it
            assertEquals(0x99L, p.readLong(h + 510 * PAGE_SIZE + PAGE_SIZE - 4));
            // part of it unmapped: split, the rest still maps, the page gone faults
            d.dmaUnmap(iova + 7 * PAGE_SIZE, 1);
            assertEquals(0, d.mappedSuperpages(), "split");
            assertEquals(512, d.mappedPages());
            assertEquals(0, phys.dmaRefs(head + 7));
            assertEquals(1, phys.dmaRefs(head), "the head now holds its own 4 KiB reference");
            assertEquals(2, phys.dmaRefs(head + 3));
            assertEquals(IommuFault.Kind.NOT_MAPPED, assertThrows(IommuFault.class, () -> d.read(iova + 7 * PAGE_SIZE, buf, 0, 8)).kind());
            d.read(iova + 511 * PAGE_SIZE + 64, buf, 0, 8);
            assertEquals(0x511L, buf.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            d.dmaUnmap(iova, 7);
            d.dmaUnmap(iova + 8 * PAGE_SIZE, 504);
            // through an IOVA range: linked whole, unlinked whole
            long base = d.dmaIovaTryAlloc(Mm.HPAGE_SIZE);
            assertEquals(0, (base - IommuDomain.IOVA_BASE) % Mm.HPAGE_SIZE);
            d.dmaIovaLink(base, pins.pfns(), 512, DmaDirection.BIDIRECTIONAL);
            assertEquals(1, d.mappedSuperpages());
            d.read(base + 7 * PAGE_SIZE + 8, buf, 0, 8);
            assertEquals(0x77L, buf.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class,
                    () -> d.dmaIovaLink(base + 9 * PAGE_SIZE, pins.pfns(), 1, DmaDirection.BIDIRECTIONAL)).errno(), "inside the 2 MiB entry: linked already");
            d.dmaIovaUnlink(base, 512);
            assertEquals(0, d.mappedSuperpages());
            assertEquals(1, d.mappedPages());
            assertEquals(IommuFault.Kind.NOT_MAPPED, assertThrows(IommuFault.class, () -> d.read(base, buf, 0, 8)).kind());
            // the leaf is used page by page again: fewer than 512, or not one huge page in order
            d.dmaIovaLink(base, pins.pfns(), 511, DmaDirection.BIDIRECTIONAL);
            assertEquals(0, d.mappedSuperpages(), "511 pages are 4 KiB entries");
            d.read(base + 7 * PAGE_SIZE + 8, buf, 0, 8);
            assertEquals(0x77L, buf.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            d.dmaIovaUnlink(base, 511);
            long[] shuffled = pins.pfns().clone();
            shuffled[100] = shuffled[101];
            shuffled[101] = pins.pfn(100);
            d.dmaIovaLink(base, shuffled, 512, DmaDirection.BIDIRECTIONAL);
            assertEquals(0, d.mappedSuperpages(), "frames out of order are 4 KiB entries");
            d.dmaIovaUnlink(base, 512);
            d.dmaIovaFree(base, Mm.HPAGE_SIZE);
        }
        d.dmaUnmap(IommuDomain.IOVA_BASE, 1);
        for (int i = 0; i < 512; i++) {
            assertEquals(0, phys.dmaRefs(head + i), "frame " + i);
        }
        pins.unpin(true);
        assertEquals(0, iommu.destroyDomain(d));
    }

    /** A huge page freed under its 2 MiB entry is a use-after-free on every page of it, also once the entry is split. */
    @Test
    void aHugePageFreedUnderIts2MiBEntryIsCaughtAsUseAfterFree() {
        AddressSpace p = setup();
        expectViolation = true;
        IommuDomain d = iommu.createDomain("buggy");
        long h = p.mmap(0, Mm.HPAGE_SIZE, org.peerdirect.kernel.mm.Vma.PROT_READ | org.peerdirect.kernel.mm.Vma.PROT_WRITE,
                org.peerdirect.kernel.mm.Vma.Kind.HUGETLB, "huge");
        p.writeLong(h, 1);
        long[] pfns = new long[512];
        for (int i = 0; i < 512; i++) {
            pfns[i] = p.pfnOf(h) + i;
        }
        long iova = d.dmaMapSg(pfns, DmaDirection.BIDIRECTIONAL); // no pin: a driver bug
        assertEquals(1, d.mappedSuperpages());
        p.munmap(h, Mm.HPAGE_SIZE);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(8);
            assertEquals(IommuFault.Kind.USE_AFTER_FREE, assertThrows(IommuFault.class, () -> d.read(iova + 300 * PAGE_SIZE, buf, 0, 8)).kind());
            d.dmaUnmap(iova + 5 * PAGE_SIZE, 1); // split
            assertEquals(IommuFault.Kind.USE_AFTER_FREE, assertThrows(IommuFault.class, () -> d.read(iova + 300 * PAGE_SIZE, buf, 0, 8)).kind(),
                    "the split keeps every page stale");
            assertEquals(IommuFault.Kind.USE_AFTER_FREE, assertThrows(IommuFault.class, () -> d.write(iova, buf, 0, 8)).kind());
        }
        assertEquals(1, iommu.audit().freedWhileMapped(), "counted once, on the head the entry references");
        assertEquals(511, iommu.destroyDomain(d));
    }

    /**
     * The ODP pattern over huge pages, under concurrency: the device maps each 2 MiB page whole
     * (one 2 MiB entry) under its lock with the sequence protocol and DMA-reads 4 KiB pages inside
     * it; its invalidate callback unmaps one page first and then the rest (so every invalidation
     * also splits the entry); CPU writers keep a placement checksum in every page while another
     * thread drops huge pages with MADV_DONTNEED. Zero use-after-free, no frame freed while
     * mapped, and every DMA read saw data of its own page.
     */
    @Test
    void hugePagesUnder2MiBEntriesAreNeverTouchedAfterTheirInvalidation() throws Exception {
        AddressSpace p = setup();
        IommuDomain d = iommu.createDomain("odp-huge");
        int huge = 4;
        int pages = huge * 512;
        long a = p.mmap(0, huge * Mm.HPAGE_SIZE, org.peerdirect.kernel.mm.Vma.PROT_READ | org.peerdirect.kernel.mm.Vma.PROT_WRITE,
                org.peerdirect.kernel.mm.Vma.Kind.HUGETLB, "huge");
        Object devLock = new Object();
        long[] iovaOf = new long[huge]; // guarded by devLock, 0 = not mapped
        AtomicLong splits = new AtomicLong();
        MmuIntervalNotifier n = p.insertNotifier(a, huge * Mm.HPAGE_SIZE, (nn, range, seq) -> {
            synchronized (devLock) {
                nn.setSeq(seq);
                for (long va = Math.max(range.start(), a) & -Mm.HPAGE_SIZE; va < Math.min(range.end(), a + huge * Mm.HPAGE_SIZE); va += Mm.HPAGE_SIZE) {
                    int i = (int) ((va - a) / Mm.HPAGE_SIZE);
                    if (iovaOf[i] != 0) {
                        boolean whole = d.mappedSuperpages() > 0;
                        d.dmaUnmap(iovaOf[i], 1);
                        if (whole && d.mappedSuperpages() == 0) {
                            splits.incrementAndGet();
                        }
                        d.dmaUnmap(iovaOf[i] + PAGE_SIZE, 511);
                        iovaOf[i] = 0;
                    }
                }
            }
            return true;
        });
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        AtomicLong dmaReads = new AtomicLong();
        AtomicLong superMaps = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        // the CPU: the first long of 4 KiB page k always holds a value whose low 16 bits are k
        threads.add(new Thread(() -> {
            long v = 0;
            while (!stop.get()) {
                for (int k = 0; k < pages; k += 37) {
                    p.writeLong(a + k * PAGE_SIZE, (++v << 16) | k);
                }
            }
        }));
        threads.add(new Thread(() -> {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment buf = arena.allocate(8);
                int k = 0;
                while (!stop.get()) {
                    k = (k + 37) % pages;
                    int i = k / 512;
                    long va = a + i * Mm.HPAGE_SIZE;
                    HmmRange r = new HmmRange(n, va, va + Mm.HPAGE_SIZE, HmmRange.HMM_PFN_REQ_FAULT);
                    int page = k;
                    faultAndLock(p, n, r, devLock, () -> {
                        if (iovaOf[i] == 0) {
                            long[] pfns = new long[512];
                            for (int j = 0; j < 512; j++) {
                                pfns[j] = HmmRange.pfn(r.hmmPfns[j]);
                            }
                            long before = d.mappedSuperpages();
                            iovaOf[i] = d.dmaMapSg(pfns, DmaDirection.BIDIRECTIONAL);
                            if (d.mappedSuperpages() == before + 1) {
                                superMaps.incrementAndGet();
                            }
                        }
                        readPlaced(d, iovaOf[i] + (page % 512) * PAGE_SIZE, buf, 0xffff, page);
                        dmaReads.incrementAndGet();
                    });
                }
            } catch (Throwable t) {
                errors.add(t);
            }
        }));
        threads.add(new Thread(() -> {
            int k = 0;
            while (!stop.get()) {
                p.madvise(a + (k++ % huge) * Mm.HPAGE_SIZE, Mm.HPAGE_SIZE, AddressSpace.Advice.MADV_DONTNEED);
            }
        }));
        runUntil(threads, errors, stop, () -> dmaReads.get() >= 5_000 && splits.get() >= 20);
        assertTrue(dmaReads.get() > 100, "the device did work: " + dmaReads.get());
        assertTrue(superMaps.get() > 10 && splits.get() > 5, "huge pages were mapped by 2 MiB entries (" + superMaps + ") and split by invalidations ("
                + splits + ")");
        synchronized (devLock) {
            for (int i = 0; i < huge; i++) {
                if (iovaOf[i] != 0) {
                    d.dmaUnmap(iovaOf[i], 512);
                }
            }
        }
        n.remove();
        assertNoDmaAfterFree();
    }

    /**
     * A device read of the 8 bytes at {@code iova}: zero (a page faulted in fresh) or the placement
     * tag of {@code page} ({@code tag & mask}); anything else is another page's data.
     */
    private static void readPlaced(IommuDomain d, long iova, MemorySegment buf, long mask, int page) {
        d.read(iova, buf, 0, 8);
        long got = buf.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        if (got != 0 && (got & mask) != page) {
            throw new AssertionError("page " + page + " read " + Long.toHexString(got));
        }
    }

    /**
     * The ODP sequence protocol: faults {@code r}'s range in, then runs {@code underLock} under
     * {@code devLock} unless an invalidation ran since the fault began (then faults again).
     */
    private static void faultAndLock(AddressSpace p, MmuIntervalNotifier n, HmmRange r, Object devLock, Runnable underLock) {
        for (;;) {
            r.notifierSeq = n.readBegin();
            try {
                p.hmmRangeFault(r);
            } catch (KernelException e) {
                if (e.errno() == KernelException.Errno.EBUSY) {
                    continue;
                }
                throw e;
            }
            synchronized (devLock) {
                if (n.readRetry(r.notifierSeq)) {
                    continue;
                }
                underLock.run();
                return;
            }
        }
    }

    /** Starts the threads, lets them run until {@code done} or 2 s or a failure, stops them (bounded joins) and asserts none failed. */
    /**
     * Runs the threads until {@code done} (the amount of interleaving the test needs to mean
     * something), an error, or 30 s: the count of operations, not the time, is what the test is
     * about, so a loaded machine (CI's 2 cores shared with a build) takes longer instead of
     * failing the minimums the test then asserts (a 2 s bound did, once, on a loaded machine).
     */
    private static void runUntil(List<Thread> threads, ConcurrentLinkedQueue<Throwable> errors, AtomicBoolean stop,
            java.util.function.BooleanSupplier done) throws InterruptedException {
        for (Thread t : threads) {
            t.setUncaughtExceptionHandler((th, e) -> errors.add(e));
            t.start();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline && errors.isEmpty() && !done.getAsBoolean()) {
            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000); // poll, leaving the cores to the workers
        }
        stop.set(true);
        for (Thread t : threads) {
            t.join(10_000);
            assertTrue(!t.isAlive(), "thread finished in bounded time");
        }
        assertTrue(errors.isEmpty(), () -> errors.peek().toString());
    }

    /** The audit after a stress run: no DMA reached a freed frame, no frame was freed mapped, no mapping left. */
    private void assertNoDmaAfterFree() {
        IommuAudit audit = iommu.audit();
        assertEquals(0, audit.useAfterFree(), audit.toString());
        assertEquals(0, audit.freedWhileMapped(), audit.toString());
        assertEquals(0, audit.liveMappings());
    }

    @Test
    void aStaleMappingToAFreedFrameIsCaughtAsUseAfterFree() {
        AddressSpace p = setup();
        expectViolation = true;
        IommuDomain d = iommu.createDomain("buggy");
        long a = p.mmap(PAGE_SIZE);
        p.writeLong(a, 1);
        long iova = d.dmaMapPage(p.pfnOf(a), DmaDirection.BIDIRECTIONAL); // no pin, no notifier: a driver bug
        p.munmap(a, PAGE_SIZE);
        p.mmap(PAGE_SIZE); // the frame may be reused
        try (Arena arena = Arena.ofConfined()) {
            IommuFault f = assertThrows(IommuFault.class, () -> d.write(iova, arena.allocate(8), 0, 8));
            assertEquals(IommuFault.Kind.USE_AFTER_FREE, f.kind());
        }
        IommuAudit audit = iommu.audit();
        assertEquals(1, audit.useAfterFree());
        assertEquals(1, audit.freedWhileMapped());
        assertEquals(1, iommu.destroyDomain(d), "the forgotten mapping is reported as leaked");
    }

    /**
     * The ODP pattern end to end, under concurrency: a "device" maps pages it got from
     * hmm_range_fault under its lock with the sequence protocol, DMA-reads them, and its
     * invalidate callback unmaps them; meanwhile the CPU writes, and another thread pages out,
     * migrates and drops the range. Zero use-after-free, and every DMA read saw data the CPU wrote.
     */
    @Test
    void odpStyleConsumerNeverTouchesFreedFramesUnderStress() throws Exception {
        AddressSpace p = setup();
        IommuDomain d = iommu.createDomain("odp");
        int pages = 64;
        long a = p.mmap(pages * PAGE_SIZE);
        Object devLock = new Object();
        long[] iovaOf = new long[pages]; // guarded by devLock, 0 = not mapped
        MmuIntervalNotifier n = p.insertNotifier(a, pages * PAGE_SIZE, (nn, range, seq) -> {
            synchronized (devLock) {
                nn.setSeq(seq);
                for (long va = Math.max(range.start(), a); va < Math.min(range.end(), a + pages * PAGE_SIZE); va += PAGE_SIZE) {
                    int i = (int) ((va - a) / PAGE_SIZE);
                    if (iovaOf[i] != 0) {
                        d.dmaUnmap(iovaOf[i], 1);
                        iovaOf[i] = 0;
                    }
                }
            }
            return true;
        });
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        AtomicLong dmaReads = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        // two CPU writers, forwards and backwards: the first long of page i always holds a value
        // whose low 8 bits are i (a checksum of placement a misdirected DMA or page would break)
        for (int w = 0; w < 2; w++) {
            boolean backwards = w == 1;
            threads.add(new Thread(() -> {
                long v = 0;
                while (!stop.get()) {
                    for (int k = 0; k < pages; k++) {
                        int i = backwards ? pages - 1 - k : k;
                        p.writeLong(a + i * PAGE_SIZE, (++v << 8) | i);
                    }
                }
            }));
        }
        // the device: fault, map under the lock with retry, read through the IOMMU, check placement
        threads.add(new Thread(() -> {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment buf = arena.allocate(8);
                int i = 0;
                while (!stop.get()) {
                    i = (i + 7) % pages;
                    long va = a + i * PAGE_SIZE;
                    HmmRange r = new HmmRange(n, va, va + PAGE_SIZE, HmmRange.HMM_PFN_REQ_FAULT);
                    int page = i;
                    faultAndLock(p, n, r, devLock, () -> {
                        if (iovaOf[page] == 0) {
                            iovaOf[page] = d.dmaMapPage(HmmRange.pfn(r.hmmPfns[0]), DmaDirection.BIDIRECTIONAL);
                        }
                        readPlaced(d, iovaOf[page], buf, 0xff, page);
                        dmaReads.incrementAndGet();
                    });
                }
            } catch (Throwable t) {
                errors.add(t);
            }
        }));
        // the kernel: reclaim, migration, madvise on the same range
        threads.add(new Thread(() -> {
            int k = 0;
            while (!stop.get()) {
                long off = (k++ % 8) * 8 * PAGE_SIZE;
                switch (k % 3) {
                    case 0 -> p.madvise(a + off, 8 * PAGE_SIZE, AddressSpace.Advice.MADV_PAGEOUT);
                    case 1 -> p.migrate(a + off, 8 * PAGE_SIZE);
                    default -> p.madvise(a + off, 8 * PAGE_SIZE, AddressSpace.Advice.MADV_DONTNEED);
                }
            }
        }));
        runUntil(threads, errors, stop, () -> dmaReads.get() >= 20_000);
        assertTrue(dmaReads.get() > 100, "the device did work: " + dmaReads.get());
        synchronized (devLock) {
            for (int i = 0; i < pages; i++) {
                if (iovaOf[i] != 0) {
                    d.dmaUnmap(iovaOf[i], 1);
                }
            }
        }
        n.remove();
        assertNoDmaAfterFree();
    }

    @Test
    void aBarRangeOfAnotherFunctionIsADmaTargetAuditedLikeFrames() {
        AddressSpace p = setup();
        org.peerdirect.kernel.pci.impl.PciBusCore bus = quietBus();
        try {
            org.peerdirect.kernel.pci.PciFunction gpu = bus.register(org.peerdirect.kernel.pci.PciDeviceSpec.builder("GPU")
                    .vendorId(0x10de).deviceId(0x20b0).classCode(0x030200).bar(1, 1 << 20).build());
            IommuDomain hca = iommu.createDomain("mlx4_0");
            // refused: unaligned, outside the BAR, no such BAR
            assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class,
                    () -> hca.dmaMapResource(gpu.resource(1), 100, 4096, DmaDirection.BIDIRECTIONAL)).errno());
            assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class,
                    () -> hca.dmaMapResource(gpu.resource(1), 0, 2 << 20, DmaDirection.BIDIRECTIONAL)).errno());
            assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class,
                    () -> hca.dmaMapResource(gpu.resource(0), 0, 4096, DmaDirection.BIDIRECTIONAL)).errno());
            // a resource that is not a PCI BAR (some other implementation of the DMA API's type) names itself
            org.peerdirect.kernel.dma.DmaResource alien = new org.peerdirect.kernel.dma.DmaResource() {
                public String owner() { return "alien"; }
                public int bar() { return 0; }
                public long size() { return 4096; }
                @Override public String toString() { return "alien BAR"; }
            };
            KernelException notPci = assertThrows(KernelException.class, () -> hca.dmaMapResource(alien, 0, 4096, DmaDirection.BIDIRECTIONAL));
            assertEquals(KernelException.Errno.EINVAL, notPci.errno());
            assertTrue(notPci.getMessage().contains("alien BAR is not a PCI BAR"), notPci.getMessage());
            assertEquals("0000:" + gpu.bdf().substring(5), gpu.resource(1).owner());
            assertEquals(1 << 20, gpu.resource(1).size());

            long iova = hca.dmaMapResource(gpu.resource(1), 64 << 10, 128 << 10, DmaDirection.BIDIRECTIONAL);
            assertEquals(32, hca.mappedPages());
            // an RDMA WRITE from host frames into the GPU's BAR: peer-to-peer through the IOMMU
            long va = p.mmap(8192);
            p.populate(va, 8192, true);
            p.write(va + 10, new byte[] {5, 6, 7}, 0, 3);
            PinnedPages pin = p.pinUserPages(va, 8192, true);
            IommuDomain host = iommu.createDomain("host_dma");
            long src = host.dmaMapSg(pin.pfns(), DmaDirection.BIDIRECTIONAL);
            host.copyTo(src + 10, hca, iova + 4096 - 1, 3); // crosses a page of the BAR mapping
            MemorySegment bar = gpu.barMemory(1);
            assertEquals(5, bar.get(java.lang.foreign.ValueLayout.JAVA_BYTE, (64 << 10) + 4096 - 1));
            assertEquals(7, bar.get(java.lang.foreign.ValueLayout.JAVA_BYTE, (64 << 10) + 4096 + 1));
            assertEquals(0, hca.fetchAdd(iova + 8192, 42), "atomics reach the BAR too");
            assertEquals(42, bar.get(java.lang.foreign.ValueLayout.JAVA_LONG, (64 << 10) + 8192));

            hca.dmaUnmap(iova, 32);
            assertThrows(IommuFault.class, () -> hca.fetchAdd(iova, 1), "no DMA after the unmap");
            assertEquals(0, iommu.audit().useAfterFree(), "an unmapped range is a fault, not a violation");

            long again = hca.dmaMapResource(gpu.resource(1), 0, 4096, DmaDirection.BIDIRECTIONAL);
            gpu.remove(); // the GPU is unplugged while its BAR is still mapped
            IommuFault f = assertThrows(IommuFault.class, () -> hca.fetchAdd(again, 1));
            assertEquals(IommuFault.Kind.USE_AFTER_FREE, f.kind());
            assertEquals(1, iommu.audit().useAfterFree(), "a DMA to a removed function's BAR is a violation");
            expectViolation = true;
            assertEquals(KernelException.Errno.ENODEV, assertThrows(KernelException.class,
                    () -> hca.dmaMapResource(gpu.resource(1), 0, 4096, DmaDirection.BIDIRECTIONAL)).errno());
            hca.dmaUnmap(again, 1);
            host.dmaUnmap(src, pin.npages());
            pin.unpin(false);
            assertEquals(0, iommu.destroyDomain(hca));
            assertEquals(0, iommu.destroyDomain(host));
        } finally {
            bus.close();
        }
    }

    /**
     * A GPU's BAR1 is a window onto its memory: a peer's DMA lands in the page the GPU maps
     * behind the BAR page now; once the GPU takes the page back, a DMA through a mapping still
     * left is a use-after-free (the stray write a freed GPU buffer must never get), and MMIO to an
     * unmapped aperture page reads all ones.
     */
    @Test
    void anApertureBarResolvesItsPagesAtEveryDmaAndCatchesAPageTakenBack() {
        AddressSpace p = setup();
        org.peerdirect.kernel.pci.impl.PciBusCore bus = quietBus();
        try (java.lang.foreign.Arena vramArena = java.lang.foreign.Arena.ofShared()) {
            MemorySegment vram = vramArena.allocate(64 << 10, 4096);
            // BAR1 page 3 shows vram page 1 (a BAR1 slot mapped onto a video-memory page)
            java.util.concurrent.atomic.AtomicReference<MemorySegment> slot3 = new java.util.concurrent.atomic.AtomicReference<>(
                    vram.asSlice(4096, 4096));
            org.peerdirect.kernel.pci.PciFunction gpu = bus.register(org.peerdirect.kernel.pci.PciDeviceSpec.builder("GPU")
                    .vendorId(0x10de).deviceId(0x20f1).classCode(0x030200)
                    .aperture(1, 1L << 34, off -> off == 3 * 4096 ? slot3.get() : null).build());
            assertEquals(1L << 34, gpu.barSize(1), "an aperture may be larger than anything the bus would allocate");
            assertThrows(IllegalArgumentException.class, () -> gpu.barMemory(1), "an aperture has no memory of its own");
            gpu.write32(1, 3 * 4096 + 8, 0x1234);
            assertEquals(0x1234, vram.get(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 4096 + 8), "MMIO goes through the window");
            assertEquals(0xffffffff, gpu.read32(1, 0), "nothing mapped behind BAR page 0: all ones");

            IommuDomain hca = iommu.createDomain("mlx5_0");
            long iova = hca.dmaMapResource(gpu.resource(1), 2 * 4096, 2 * 4096, DmaDirection.BIDIRECTIONAL);
            long va = p.mmap(4096);
            p.populate(va, 4096, true);
            p.write(va, new byte[] {9, 8, 7}, 0, 3);
            PinnedPages pin = p.pinUserPages(va, 4096, true);
            IommuDomain host = iommu.createDomain("host_dma");
            long src = host.dmaMapSg(pin.pfns(), DmaDirection.BIDIRECTIONAL);
            host.copyTo(src, hca, iova + 4096 + 100, 3);
            assertEquals(8, vram.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 4096 + 101), "the peer write lands in video memory");
            assertEquals(3, hca.barBytes(), "counted as peer-to-peer bytes of the HCA's domain");
            assertEquals(0, host.barBytes());
            assertEquals(3, iommu.barBytes());
            assertEquals(0, hca.fetchAdd(iova + 4096 + 200, 42));
            assertEquals(42, vram.get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 4096 + 200), "atomics reach the window too");
            IommuFault unmappedPage = assertThrows(IommuFault.class, () -> host.copyTo(src, hca, iova, 3));
            assertEquals(IommuFault.Kind.USE_AFTER_FREE, unmappedPage.kind(), "BAR page 2 shows nothing: " + unmappedPage.getMessage());

            slot3.set(null); // the GPU takes the page back while the HCA's mapping is still there
            IommuFault f = assertThrows(IommuFault.class, () -> host.copyTo(src, hca, iova + 4096, 3));
            assertEquals(IommuFault.Kind.USE_AFTER_FREE, f.kind());
            assertTrue(f.getMessage().contains("no longer mapped by its device"), f.getMessage());
            assertEquals(2, iommu.audit().useAfterFree(), "both stray accesses are violations");
            expectViolation = true;
            hca.dmaUnmap(iova, 2);
            host.dmaUnmap(src, pin.npages());
            pin.unpin(false);
            assertEquals(0, iommu.destroyDomain(hca));
            assertEquals(0, iommu.destroyDomain(host));
        } finally {
            bus.close();
        }
    }

    /**
     * RDMA FLUSH's flushing read: it reaches a persistent aperture BAR as one flush per run of
     * consecutive BAR pages (not per page, not for frames), a device's failed flush is EIO, an
     * unmapped page faults like any read; {@code persistent} holds only for pages of a BAR its
     * device declares persistent, never for host frames or partly mapped ranges.
     */
    @Test
    void aFlushingReadReachesAPersistentBarOncePerRunAndFramesAreNeverPersistent() {
        AddressSpace p = setup();
        org.peerdirect.kernel.pci.impl.PciBusCore bus = quietBus();
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared()) {
            MemorySegment pmr = arena.allocate(16 * 4096, 4096);
            java.util.List<String> flushes = new java.util.concurrent.CopyOnWriteArrayList<>();
            java.util.concurrent.atomic.AtomicBoolean mediaOk = new java.util.concurrent.atomic.AtomicBoolean(true);
            org.peerdirect.kernel.pci.BarAperture window = new org.peerdirect.kernel.pci.BarAperture() {
                @Override
                public MemorySegment page(long off) {
                    return pmr.asSlice(off, 4096);
                }

                @Override
                public boolean persistent() {
                    return true;
                }

                @Override
                public boolean flush(long off, long len) {
                    flushes.add(Long.toHexString(off) + "+" + Long.toHexString(len));
                    return mediaOk.get();
                }
            };
            org.peerdirect.kernel.pci.PciFunction ssd = bus.register(org.peerdirect.kernel.pci.PciDeviceSpec.builder("SSD")
                    .vendorId(0x144d).deviceId(0xa824).classCode(0x010802).aperture(2, 16 * 4096, window).build());
            org.peerdirect.kernel.pci.PciFunction gpu = bus.register(org.peerdirect.kernel.pci.PciDeviceSpec.builder("GPU")
                    .vendorId(0x10de).deviceId(0x20f1).classCode(0x030200).aperture(1, 16 * 4096, off -> pmr.asSlice(off, 4096)).build());
            IommuDomain hca = iommu.createDomain("mlx5_0");
            long a = hca.dmaMapResource(ssd.resource(2), 4 * 4096, 4 * 4096, DmaDirection.BIDIRECTIONAL);
            long g = hca.dmaMapResource(gpu.resource(1), 0, 2 * 4096, DmaDirection.BIDIRECTIONAL);
            long va = p.mmap(2 * 4096);
            p.populate(va, 2 * 4096, true);
            PinnedPages pin = p.pinUserPages(va, 2 * 4096, true);
            long f = hca.dmaMapSg(pin.pfns(), DmaDirection.BIDIRECTIONAL);

            hca.flush(a + 100, 3 * 4096);
            assertEquals(java.util.List.of("4000+4000"), flushes, "pages 0..3 of the mapping (BAR 0x4000..0x8000) in one run");
            flushes.clear();
            hca.flush(a + 4 * 4096 - 1, 0);
            assertEquals(java.util.List.of(), flushes, "a zero-length flush reaches nothing");
            hca.flush(f, 2 * 4096);
            hca.flush(g, 2 * 4096);
            assertEquals(java.util.List.of(), flushes, "frames and a non-persistent BAR: only the fence");
            mediaOk.set(false);
            KernelException eio = assertThrows(KernelException.class, () -> hca.flush(a, 4096));
            assertEquals(KernelException.Errno.EIO, eio.errno(), eio.getMessage());
            assertTrue(eio.getMessage().contains("BAR 2"), eio.getMessage());
            mediaOk.set(true);
            IommuFault past = assertThrows(IommuFault.class, () -> hca.flush(f + 4096, 2 * 4096));
            assertEquals(IommuFault.Kind.NOT_MAPPED, past.kind(), "a page past the mapping faults like any read");
            assertThrows(KernelException.class, () -> hca.flush(a, -1));

            assertTrue(hca.persistent(a, 4 * 4096), "all four pages are PMR pages");
            assertTrue(hca.persistent(a + 4095, 2), "a range across two PMR pages");
            assertFalse(hca.persistent(a, 5 * 4096), "the fifth page is the GPU's (mapped next)");
            assertFalse(hca.persistent(f + 4096, 2 * 4096), "the page after the frames is not mapped");
            assertFalse(hca.persistent(g, 4096), "a GPU BAR is not persistent memory");
            assertFalse(hca.persistent(f, 4096), "host frames are RAM");
            assertFalse(hca.persistent(a, 0), "an empty range proves nothing");
            expectViolation = true; // the fault above
            hca.dmaUnmap(a, 4);
            hca.dmaUnmap(g, 2);
            hca.dmaUnmap(f, pin.npages());
            pin.unpin(false);
            assertEquals(0, iommu.destroyDomain(hca));
        } finally {
            bus.close();
        }
    }

    /** A PCI bus over this test's IOMMU that nobody listens to. */
    private static org.peerdirect.kernel.pci.impl.PciBusCore quietBus() {
        return new org.peerdirect.kernel.pci.impl.PciBusCore(new org.peerdirect.kernel.pci.impl.PciBusCore.Listener() {
            @Override
            public void added(org.peerdirect.kernel.pci.PciFunction f) {
            }

            @Override
            public void removed(org.peerdirect.kernel.pci.PciFunction f) {
            }
        }, w -> {
        });
    }
}
