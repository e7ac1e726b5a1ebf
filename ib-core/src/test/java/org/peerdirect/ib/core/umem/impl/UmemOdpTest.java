package org.peerdirect.ib.core.umem.impl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.testing.Rig;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.ib.core.umem.UmemOdpInvalidate;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace.Advice;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.MmuNotifierEvent;
import org.peerdirect.kernel.mm.MmuNotifierRange;
import org.peerdirect.kernel.mm.Vma;

/**
 * {@code ib_umem_odp}: nothing pinned or mapped at registration, the fault and snapshot paths,
 * invalidation by every kind of change to the process's pages (the mapping is gone before the
 * callback returns), the collision-retry protocol under a racing invalidator (the IOMMU audit
 * sees no frame freed while the device maps it), huge-page granules, implicit umems and their
 * children, and the errors. The "driver" here is {@link #zapper}: the invalidation contract as
 * mlx5 follows it, with a device translation that is the umem's own list.
 */
class UmemOdpTest {

    static final int RW = IbAccess.ON_DEMAND | IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ;
    static final long R = IbUmemOdp.ODP_READ_ALLOWED;
    static final long W = IbUmemOdp.ODP_WRITE_ALLOWED;

    @TempDir
    Path tmp;
    Rig rig;
    final List<MmuNotifierRange> invalidations = new CopyOnWriteArrayList<>();
    /** The invalidation contract with no device translation to zap (rxe's), recording each call. */
    final UmemOdpInvalidate zapper = (umem, range, cur) -> {
        UmemOdpInvalidate.UNMAP_ONLY.invalidate(umem, range, cur);
        invalidations.add(range);
        return true;
    };

    @BeforeEach
    void setUp() {
        rig = new Rig(tmp, 128 << 20);
    }

    @AfterEach
    void tearDown() {
        rig.close();
    }

    IommuDomain domain() {
        return rig.dev.iommuDomain();
    }

    IbUmemOdp odp(long va, long len, int access) {
        return rig.umems.umemOdpGet(rig.proc, rig.dev, va, len, access, zapper);
    }

    /** The device reads 8 bytes through the umem's entry for va (the caller holds the umem mutex). */
    long deviceRead(IbUmemOdp u, long va) {
        long e = u.dmaEntry(va);
        assertNotEquals(0, e, "page 0x" + Long.toHexString(va) + " is mapped for the device");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(8);
            domain().read((e & IbUmemOdp.ODP_DMA_ADDR_MASK) + (va & ((1L << u.pageShift()) - 1)), s, 0, 8);
            return s.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        }
    }

    void deviceWrite(IbUmemOdp u, long va, long v) {
        long e = u.dmaEntry(va);
        assertTrue((e & W) != 0, "page 0x" + Long.toHexString(va) + " is writable for the device");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(8);
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, v);
            domain().write((e & IbUmemOdp.ODP_DMA_ADDR_MASK) + (va & ((1L << u.pageShift()) - 1)), s, 0, 8);
        }
    }

    @Test
    void aTebibyteRegistrationPinsMapsAndCostsNothingUntilTouched() {
        long len = 1L << 40;
        long va = rig.proc.mmap(len);
        long rss = rig.proc.rssPages();
        IbUmemOdp u = odp(va, len, RW);
        assertEquals(0, u.mappedPages());
        assertEquals(0, u.metadataBytes(), "no per-page list for an untouched range");
        assertEquals(0, rig.dev.dma().mappedPages());
        assertEquals(0, rig.proc.pinnedPages(), "nothing charged to memlock");
        assertEquals(rss, rig.proc.rssPages(), "nothing faulted in");

        long far = va + (len >> 1) + 12345;
        assertEquals(1, u.mapDmaAndLock(far, 8, R | W, true));
        try {
            deviceWrite(u, far, 0x0DDBA11L);
        } finally {
            u.unlock();
        }
        assertEquals(0x0DDBA11L, rig.proc.readLong(far), "the process sees the device's write");
        assertEquals(1, u.mappedPages());
        assertTrue(u.metadataBytes() > 0 && u.metadataBytes() < 8 << 10, "one chunk: " + u.metadataBytes() + " bytes");
        u.release();
        assertEquals(0, rig.dev.dma().mappedPages());
        rig.proc.munmap(va, len);
    }

    @Test
    void aReadFaultMapsTheProcesssPageReadOnlyAndAWriteFaultUpgradesItInPlace() {
        long va = rig.proc.mmap(1 << 20);
        rig.proc.writeLong(va + 4096 + 8, 42);
        IbUmemOdp u = odp(va, 1 << 20, RW);
        assertEquals(1, u.mapDmaAndLock(va + 4096 + 8, 8, R, true));
        long first;
        try {
            first = u.dmaEntry(va + 4096);
            assertEquals(R, first & ~IbUmemOdp.ODP_DMA_ADDR_MASK, "read access only");
            assertEquals(42, deviceRead(u, va + 4096 + 8));
        } finally {
            u.unlock();
        }
        assertEquals(1, u.mapDmaAndLock(va + 4096, 4096, R | W, true));
        try {
            long second = u.dmaEntry(va + 4096);
            assertEquals(first & IbUmemOdp.ODP_DMA_ADDR_MASK, second & IbUmemOdp.ODP_DMA_ADDR_MASK, "the same mapping, no invalidation");
            assertEquals(R | W, second & ~IbUmemOdp.ODP_DMA_ADDR_MASK);
            deviceWrite(u, va + 4096 + 8, 43);
        } finally {
            u.unlock();
        }
        assertEquals(43, rig.proc.readLong(va + 4096 + 8));
        assertEquals(1, u.mappedPages());
        assertEquals(List.of(), invalidations);
        u.release();
        rig.proc.munmap(va, 1 << 20);
    }

    @Test
    void theSnapshotMapsOnlyPagesPresentForTheCpuWithTheCpusWriteRight() {
        long va = rig.proc.mmap(8 * 4096);
        rig.proc.readLong(va + 4096); // read fault: the zero page mapping, not writable
        rig.proc.writeLong(va + 3 * 4096, 3);
        rig.proc.readLong(va + 5 * 4096);
        IbUmemOdp u = odp(va, 8 * 4096, RW);
        assertEquals(3, u.mapDmaAndLock(va, 8 * 4096, R | W, false));
        try {
            for (int p = 0; p < 8; p++) {
                long e = u.dmaEntry(va + p * 4096L) & ~IbUmemOdp.ODP_DMA_ADDR_MASK;
                long want = p == 3 ? R | W : p == 1 || p == 5 ? R : 0;
                assertEquals(want, e, "page " + p + ": NIC-present only where CPU-present, writable only where the CPU may write");
            }
            assertEquals(3, deviceRead(u, va + 3 * 4096));
        } finally {
            u.unlock();
        }
        assertEquals(3, u.mappedPages());
        u.release();
        rig.proc.munmap(va, 8 * 4096);
    }

    @Test
    void everyChangeToThePagesUnmapsThemBeforeTheCallerGoesOn() throws Exception {
        long va = rig.proc.mmap(16 * 4096);
        IbUmemOdp u = odp(va, 16 * 4096, RW);
        long mappedBefore = rig.dev.dma().mappedPages();
        // madvise(DONTNEED): the pages go; the device sees the new (zero) pages after a refault
        fault(u, va, 4 * 4096, 7);
        assertEquals(mappedBefore + 4, rig.dev.dma().mappedPages());
        rig.proc.madvise(va, 4 * 4096, Advice.MADV_DONTNEED);
        assertEquals(0, u.mappedPages(), "DONTNEED unmapped every page");
        assertEquals(mappedBefore, rig.dev.dma().mappedPages(), "and the IOMMU mappings");
        assertEquals(MmuNotifierEvent.CLEAR, last().event());
        assertEquals(1, u.mapDmaAndLock(va, 8, R, true));
        try {
            assertEquals(0, deviceRead(u, va), "the device reads the new zero page, not the old frame");
        } finally {
            u.unlock();
        }
        // page-out to swap: the data comes back, through another frame
        fault(u, va + 4 * 4096, 2 * 4096, 9);
        rig.proc.madvise(va + 4 * 4096, 2 * 4096, Advice.MADV_PAGEOUT);
        assertEquals(1, u.mappedPages(), "only the page outside the paged-out range stays");
        assertEquals(1, u.mapDmaAndLock(va + 4 * 4096, 8, R, true));
        try {
            assertEquals(9, deviceRead(u, va + 4 * 4096), "swapped back in");
        } finally {
            u.unlock();
        }
        // migration moves the frames
        fault(u, va + 8 * 4096, 4096, 11);
        long before = invalidations.size();
        assertEquals(1, rig.proc.migrate(va + 8 * 4096, 4096));
        assertEquals(before + 1, invalidations.size());
        assertEquals(MmuNotifierEvent.MIGRATE, last().event());
        assertEquals(2, u.mappedPages());
        // munmap of part of the range
        fault(u, va + 12 * 4096, 4 * 4096, 13);
        rig.proc.munmap(va + 12 * 4096, 4 * 4096);
        assertEquals(MmuNotifierEvent.UNMAP, last().event());
        assertEquals(2, u.mappedPages());
        KernelException hole = assertThrows(KernelException.class, () -> u.mapDmaAndLock(va + 12 * 4096, 8, R, true));
        assertEquals(Errno.EFAULT, hole.errno(), "a fault in the hole fails: " + hole.getMessage());
        assertFalse(u.isLockedByCurrentThread(), "a failed map returns without the mutex");
        u.release();
        assertEquals(mappedBefore, rig.dev.dma().mappedPages());
        rig.proc.munmap(va, 12 * 4096);
    }

    /** Faults [va, va+len) for write, writes {@code v} at va through the device. */
    void fault(IbUmemOdp u, long va, long len, long v) {
        assertEquals(len / 4096, u.mapDmaAndLock(va, len, R | W, true));
        try {
            deviceWrite(u, va, v);
        } finally {
            u.unlock();
        }
        assertEquals(v, rig.proc.readLong(va));
    }

    MmuNotifierRange last() {
        return invalidations.get(invalidations.size() - 1);
    }

    @Test
    void aDeviceWriteToASharedFileMappingIsWrittenBackAndTheNextWriteFaultsAgain() throws Exception {
        Path file = tmp.resolve("data");
        Files.write(file, new byte[4 * 4096]);
        long va = rig.proc.mmapFile(0, file, 0, 4 * 4096, Vma.PROT_READ | Vma.PROT_WRITE, "data");
        IbUmemOdp u = odp(va, 4 * 4096, RW);
        fault(u, va + 4096, 4096, 0x1122334455667788L);
        assertEquals(1, rig.proc.msync(va, 4 * 4096), "the page the device wrote is dirty and written back");
        assertEquals(MmuNotifierEvent.PROTECTION_PAGE, last().event());
        assertEquals(0, u.mappedPages(), "cleaning for writeback took the device's mapping");
        byte[] got = Files.readAllBytes(file);
        byte[] want = new byte[8];
        MemorySegment.ofArray(want).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 0x1122334455667788L);
        assertArrayEquals(want, java.util.Arrays.copyOfRange(got, 4096, 4096 + 8));
        fault(u, va + 4096, 4096, 5);
        assertEquals(1, rig.proc.msync(va, 4 * 4096), "the device's next write dirtied it again");
        u.release();
        rig.proc.munmap(va, 4 * 4096);
    }

    @Test
    void hugetlbGranulesAre2MiBAndANonHugeMappingIsRefused() {
        long len = 2 * Mm.HPAGE_SIZE;
        long va = rig.proc.mmap(0, len, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "huge");
        IbUmemOdp u = odp(va, len, RW | IbAccess.HUGETLB);
        assertEquals(21, u.pageShift());
        long mapped = rig.dev.dma().mappedPages();
        assertEquals(1, u.mapDmaAndLock(va + Mm.HPAGE_SIZE + 4096, 8, R | W, true));
        try {
            deviceWrite(u, va + Mm.HPAGE_SIZE + Mm.HPAGE_SIZE - 8, 21);
        } finally {
            u.unlock();
        }
        assertEquals(21, rig.proc.readLong(va + Mm.HPAGE_SIZE + Mm.HPAGE_SIZE - 8), "one IOVA range covers the whole granule");
        assertEquals(1, u.mappedPages());
        assertEquals(mapped + 512, rig.dev.dma().mappedPages());
        u.release();
        rig.proc.munmap(va, len);

        long small = rig.proc.mmap(len);
        IbUmemOdp v = odp(small, len, RW | IbAccess.HUGETLB);
        KernelException e = assertThrows(KernelException.class, () -> v.mapDmaAndLock(small, 8, R, true));
        assertEquals(Errno.EINVAL, e.errno(), e.getMessage());
        assertFalse(v.isLockedByCurrentThread());
        v.release();
        rig.proc.munmap(small, len);
    }

    @Test
    void anImplicitUmemHasNoRangeAndItsChildrenAreOrdinaryOdpUmems() {
        IbUmemOdp root = rig.umems.umemOdpAllocImplicit(rig.proc, rig.dev, RW);
        assertTrue(root.isImplicit());
        assertEquals(0, root.metadataBytes());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> root.mapDmaAndLock(0, 4096, R, true)).errno());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class,
                () -> rig.umems.umemOdpAllocImplicit(rig.proc, rig.dev, RW | IbAccess.HUGETLB)).errno());
        long va = rig.proc.mmap(64 << 10);
        long gib = va & -(1L << 30);
        IbUmemOdp child = root.allocChild(gib, 1L << 30, zapper);
        assertFalse(child.isImplicit());
        assertEquals(gib, child.start());
        fault(child, va, 4096, 99);
        rig.proc.madvise(va, 4096, Advice.MADV_DONTNEED);
        assertEquals(0, child.mappedPages(), "the child's own notifier unmapped it");
        child.release();
        root.release();
        rig.proc.munmap(va, 64 << 10);
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> child.allocChild(0, 4096, zapper)).errno(),
                "only an implicit umem has children");
    }

    @Test
    void badArgumentsAreRefusedByName() {
        long va = rig.proc.mmap(1 << 20);
        KernelException e = assertThrows(KernelException.class, () -> odp(va, 4096, IbAccess.LOCAL_WRITE));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("IB_ACCESS_ON_DEMAND"), e.getMessage());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> odp(va, 0, RW)).errno());
        assertEquals(Errno.EOVERFLOW, assertThrows(KernelException.class, () -> odp(Long.MAX_VALUE - 100, 200, RW)).errno());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class,
                () -> rig.umems.umemOdpGet(rig.proc, rig.dev, va, 4096, RW, null)).errno());
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class,
                () -> rig.umems.umemGet(rig.proc, rig.dev, va, 4096, RW, 0)).errno(), "ib_umem_get does not take ON_DEMAND");

        IbUmemOdp u = odp(va, 8192, RW);
        assertEquals(Errno.EFAULT, assertThrows(KernelException.class, () -> u.mapDmaAndLock(va + 8192, 8, R, true)).errno(), "past the end");
        assertEquals(Errno.EFAULT, assertThrows(KernelException.class, () -> u.mapDmaAndLock(va - 4096, 8, R, true)).errno(), "before the start");
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> u.mapDmaAndLock(va, 8, W, true)).errno(), "write without read");
        IbUmemOdp ro = odp(va, 8192, IbAccess.ON_DEMAND | IbAccess.REMOTE_READ);
        assertEquals(Errno.EFAULT, assertThrows(KernelException.class, () -> ro.mapDmaAndLock(va, 8, R | W, true)).errno(),
                "write access to a read-only registration");
        ro.release();
        u.release();
        assertThrows(IllegalStateException.class, u::release);
        rig.proc.munmap(va, 1 << 20);
    }

    @Test
    void aFaultAfterTheProcessExitedIsEinvalAndReleaseStillCleansUp() {
        var other = rig.mm.createProcess("short-lived");
        long va = other.mmap(1 << 20);
        IbUmemOdp u = rig.umems.umemOdpGet(other, rig.dev, va, 1 << 20, RW, zapper);
        assertEquals(2, u.mapDmaAndLock(va, 8192, R | W, true));
        u.unlock();
        other.exit();
        assertEquals(0, u.mappedPages(), "exit's release invalidation unmapped the pages");
        assertEquals(MmuNotifierEvent.RELEASE, last().event());
        KernelException e = assertThrows(KernelException.class, () -> u.mapDmaAndLock(va, 8, R, true));
        assertEquals(Errno.EINVAL, e.errno(), e.getMessage());
        u.release();
        assertEquals(Errno.EFAULT, assertThrows(KernelException.class,
                () -> rig.umems.umemOdpAllocImplicit(other, rig.dev, RW).allocChild(0, 1L << 30, zapper)).errno());
    }

    /**
     * The collision-retry protocol, deterministically: the page is dropped after the walk found
     * its frame and before the mutex is taken. The walk must be retried (a new zero page faulted
     * in and mapped); installing the first walk's frame would map a freed frame, and the
     * device's write would go where the process never looks.
     */
    @Test
    void aDropBetweenTheWalkAndTheMutexMakesTheFaultWalkAgain() {
        long va = rig.proc.mmap(1 << 20);
        rig.proc.writeLong(va, 1);
        UmemOdp u = (UmemOdp) odp(va, 1 << 20, RW);
        AtomicLong walks = new AtomicLong();
        u.afterWalk = () -> {
            if (walks.incrementAndGet() == 1) {
                rig.proc.madvise(va, 4096, Advice.MADV_DONTNEED);
            }
        };
        assertEquals(1, u.mapDmaAndLock(va, 8, R | W, true));
        try {
            deviceWrite(u, va, 77);
        } finally {
            u.unlock();
        }
        assertEquals(2, walks.get(), "the overtaken walk was done again");
        assertEquals(77, rig.proc.readLong(va), "the device wrote the page the process has now");
        assertEquals(1, invalidations.size());
        u.release();
        rig.proc.munmap(va, 1 << 20);
    }

    /**
     * The kernel's bound on the fault path is {@code hmm_range_fault}'s own EBUSY past its timeout,
     * not the {@code mmu_interval_read_retry} check: a walk overtaken after it finished is walked
     * again however long that took. Here the timeout has passed before the first walk and the
     * page is dropped after each of the first three walks: the fourth walk maps it. (A deadline on
     * the retry check failed such a fault with EBUSY, which the driver turns into an error
     * completion: the storm test's REM_ACCESS_ERR on a loaded machine.)
     */
    @Test
    void aWalkOvertakenAfterTheTimeoutIsStillWalkedAgain() {
        long va = rig.proc.mmap(1 << 20);
        rig.proc.writeLong(va, 1);
        UmemOdp u = (UmemOdp) odp(va, 1 << 20, RW);
        u.hmmTimeoutNs = 0;
        AtomicLong walks = new AtomicLong();
        u.afterWalk = () -> {
            if (walks.incrementAndGet() <= 3) {
                rig.proc.madvise(va, 4096, Advice.MADV_DONTNEED);
            }
        };
        assertEquals(1, u.mapDmaAndLock(va, 8, R | W, true));
        try {
            deviceWrite(u, va, 78);
        } finally {
            u.unlock();
        }
        assertEquals(4, walks.get(), "each overtaken walk was done again");
        assertEquals(78, rig.proc.readLong(va), "the device wrote the page the process has now");
        u.release();
        rig.proc.munmap(va, 1 << 20);
    }

    /**
     * The collision-retry protocol under load: one thread faults pages for write and writes
     * through the device under the umem mutex, another drops and re-touches them. A mapping
     * installed from a walk an invalidation overtook would keep a freed frame mapped; the IOMMU
     * audit (checked by the rig at the end) counts every such frame, and every device write must
     * be seen by the process.
     */
    @Test
    void aWalkOvertakenByAnInvalidationIsNeverInstalled() throws Exception {
        int pages = 16;
        long va = rig.proc.mmap(pages * 4096L);
        IbUmemOdp u = odp(va, pages * 4096L, RW);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong drops = new AtomicLong();
        Thread dropper = Thread.ofPlatform().name("dontneed").start(() -> {
            try {
                java.util.SplittableRandom r = new java.util.SplittableRandom(7);
                while (!stop.get()) {
                    int p = r.nextInt(pages);
                    rig.proc.madvise(va + p * 4096L, 4096, Advice.MADV_DONTNEED);
                    rig.proc.readLong(va + p * 4096L);
                    drops.incrementAndGet();
                }
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        java.util.SplittableRandom r = new java.util.SplittableRandom(11);
        long retriesSeen = 0;
        try {
            for (int i = 0; i < 3000 && failure.get() == null; i++) {
                int p = r.nextInt(pages);
                long a = va + p * 4096L;
                u.mapDmaAndLock(a, 8, R | W, true);
                try {
                    deviceWrite(u, a, i + 1);
                } finally {
                    u.unlock();
                }
                long seen = rig.proc.readLong(a);
                // the page may have been dropped since (then it reads 0): never another write's value
                assertTrue(seen == i + 1 || seen == 0, "page " + p + " holds " + seen + " after device write " + (i + 1));
                retriesSeen += seen == 0 ? 1 : 0;
            }
        } finally {
            stop.set(true);
            dropper.join(10_000);
        }
        if (failure.get() != null) {
            throw new AssertionError("the dropper failed", failure.get());
        }
        assertTrue(drops.get() > 0, "the dropper ran");
        assertEquals(0, domain().useAfterFreeCount(), "no device access to a freed frame");
        u.release();
        rig.proc.munmap(va, pages * 4096L);
    }

    /**
     * An invalidation that reaches a umem's notifier the moment it is inserted, before
     * {@code ib_umem_odp_get} returns: the callback's {@code mmu_interval_set_seq} must find the
     * notifier (in the kernel it is embedded in the umem before the insert). One thread registers
     * and releases umems over a range while another drops its pages; every drop must succeed.
     * Caught in CI through mlx5's implicit-ODP race test (an NPE in the CLEAR callback, the drop
     * failing with EIO); bounded by iterations and time, not by sleeps.
     */
    @Test
    void anInvalidationRightAfterTheNotifierIsInsertedFindsItsNotifier() throws Exception {
        long len = 4 * 4096;
        long va = rig.proc.mmap(len);
        rig.proc.populate(va, len, true);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        AtomicLong drops = new AtomicLong();
        Thread dropper = Thread.ofPlatform().name("dropper").start(() -> {
            try {
                while (!stop.get()) {
                    rig.proc.madvise(va, len, Advice.MADV_DONTNEED);
                    drops.incrementAndGet();
                }
            } catch (Throwable t) {
                failed.set(t);
            }
        });
        long deadline = System.nanoTime() + 3_000_000_000L;
        int registrations = 0;
        try {
            while (failed.get() == null && registrations < 200_000 && System.nanoTime() < deadline) {
                odp(va, len, RW).release();
                registrations++;
            }
        } finally {
            stop.set(true);
            dropper.join(10_000);
        }
        if (failed.get() != null) {
            throw new AssertionError("a drop failed after " + registrations + " registrations", failed.get());
        }
        assertTrue(drops.get() > 0 && registrations > 0, drops + " drops, " + registrations + " registrations");
    }
}
