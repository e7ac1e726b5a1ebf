package org.peerdirect.kernel.mm;

import org.peerdirect.kernel.mm.internal.PhysicalMemory;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.mm.KernelException.Errno;

class MmTest {

    @TempDir
    Path tmp;

    private Mm mm;

    private Mm mm(long memory, long swap) {
        mm = new Mm(memory, true, tmp.resolve("swap"), swap);
        return mm;
    }

    @AfterEach
    void close() {
        if (mm != null) {
            mm.close();
            assertEquals(PhysicalMemory.of(mm).nrFrames(), PhysicalMemory.of(mm).freeFrames(), "every frame is free after close");
        }
    }

    private static void assertErrno(Errno errno, Runnable r) {
        KernelException e = assertThrows(KernelException.class, r::run);
        assertEquals(errno, e.errno(), e.getMessage());
    }

    /** Issue 10 defect 5: pids came from a counter; 100 000 spawns filled the heap. */
    @Test
    void pidsAreBoundedByPidMaxAndReused() {
        Mm m = mm(16 << 20, 1 << 20);
        m.setPidMax(Mm.PID_MAX_MIN);
        List<AddressSpace> alive = new ArrayList<>();
        // pids 100..300 (wrapping goes back to RESERVED_PIDS, 300): 201 processes fit below pid_max 301
        while (alive.size() < 201) {
            alive.add(m.createProcess("p"));
        }
        KernelException e = assertThrows(KernelException.class, () -> m.createProcess("one too many"));
        assertEquals(Errno.EAGAIN, e.errno());
        assertTrue(e.getMessage().contains("pid_max 301"), e.getMessage());
        // as in kernel/pid.c, pids below RESERVED_PIDS are not handed out again after the wrap
        alive.remove(50).exit();
        assertErrno(Errno.EAGAIN, () -> m.createProcess("low pids stay free"));
        AddressSpace last = alive.remove(alive.size() - 1);
        assertEquals(300, last.pid());
        last.exit();
        assertEquals(300, m.createProcess("reuses").pid(), "a freed pid above RESERVED_PIDS is reused");
        assertErrno(Errno.EINVAL, () -> m.setPidMax(300));
        assertErrno(Errno.EINVAL, () -> m.setPidMax(Mm.PID_MAX_LIMIT + 1));
        // a long-lived container: spawn/exit cycles far past pid_max never run out
        m.setPidMax(Mm.PID_MAX_DEFAULT);
        for (int i = 0; i < 100_000; i++) {
            m.createProcess("cycle").exit();
        }
        for (AddressSpace p : m.processes()) {
            p.exit();
        }
        assertEquals(0, m.processes().size());
    }

    @Test
    void anonymousMemoryFaultsInZeroedOnFirstTouchAndKeepsData() {
        AddressSpace p = mm(64 << 20, 16 << 20).createProcess("t");
        long a = p.mmap(1 << 20);
        assertEquals(0, p.rssPages(), "nothing resident before the first touch");
        assertEquals(0, p.readLong(a + 8192));
        p.writeLong(a + 8192, 0x1234_5678_9abcL);
        assertEquals(0x1234_5678_9abcL, p.readLong(a + 8192));
        byte[] data = new byte[3 * 4096 + 100];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 31);
        }
        p.write(a + 4000, data, 0, data.length); // crosses page boundaries
        byte[] back = new byte[data.length];
        p.read(a + 4000, back, 0, back.length);
        assertArrayEquals(data, back);
        p.writeLong(a + 4092, -2L); // a long across a page boundary
        assertEquals(-2L, p.readLong(a + 4092));
        assertEquals(5, p.rssPages());
        // page 2 was read before written: a read fault, then a write(-protect) fault, as on Linux
        assertEquals(6, p.faultCount());
    }

    @Test
    void protectionsAreEnforcedLikeSigsegv() {
        AddressSpace p = mm(64 << 20, 16 << 20).createProcess("t");
        long a = p.mmap(4 * PAGE_SIZE);
        p.writeLong(a, 7);
        p.mprotect(a, PAGE_SIZE, Vma.PROT_READ);
        assertEquals(7, p.readLong(a));
        SegmentationFault f = assertThrows(SegmentationFault.class, () -> p.writeLong(a, 8));
        assertEquals(a, f.address());
        assertEquals(7, p.readLong(a), "the refused write changed nothing");
        p.writeLong(a + PAGE_SIZE, 9); // the rest of the VMA is still writable (split)
        p.mprotect(a, PAGE_SIZE, Vma.PROT_NONE);
        assertThrows(SegmentationFault.class, () -> p.readLong(a));
        p.mprotect(a, PAGE_SIZE, Vma.PROT_READ | Vma.PROT_WRITE);
        assertEquals(7, p.readLong(a), "the page survived PROT_NONE");
        p.writeLong(a, 8);
        assertEquals(8, p.readLong(a));
        assertThrows(SegmentationFault.class, () -> p.readLong(a + 4 * PAGE_SIZE), "beyond the VMA");
        assertThrows(SegmentationFault.class, () -> p.readLong(-8));
        assertEquals(1, p.maps().size(), "equal neighbours merge again, as vma_merge does: " + p.maps());
    }

    @Test
    void munmapFreesAndPoisonsFramesAndRejectsBadRanges() {
        Mm m = mm(64 << 20, 16 << 20);
        AddressSpace p = m.createProcess("t");
        long free0 = PhysicalMemory.of(m).freeFrames();
        long a = p.mmap(8 * PAGE_SIZE);
        for (int i = 0; i < 8; i++) {
            p.writeLong(a + i * PAGE_SIZE, 42);
        }
        long pfn = p.pfnOf(a);
        assertEquals(free0 - 8, PhysicalMemory.of(m).freeFrames());
        assertErrno(Errno.EINVAL, () -> p.munmap(a + 1, PAGE_SIZE));
        assertErrno(Errno.EINVAL, () -> p.munmap(a, 0));
        assertErrno(Errno.EOVERFLOW, () -> p.munmap(a, Long.MAX_VALUE));
        p.munmap(a, 8 * PAGE_SIZE);
        assertEquals(free0, PhysicalMemory.of(m).freeFrames());
        assertTrue(PhysicalMemory.of(m).isFree(pfn));
        assertEquals(PhysicalMemory.POISON, PhysicalMemory.of(m).readLong(pfn, 0), "freed frames carry the poison pattern");
        assertErrno(Errno.EINVAL, () -> p.munmap(a, PAGE_SIZE));
        assertThrows(SegmentationFault.class, () -> p.readLong(a));
    }

    @Test
    void pinningChargesMemlockRefusesDeviceMappingsAndOutlivesMunmap() {
        Mm m = mm(64 << 20, 16 << 20);
        AddressSpace p = m.createProcess("t");
        p.setMemlockLimit(16 * PAGE_SIZE);
        long a = p.mmap(32 * PAGE_SIZE);
        p.populate(a, 32 * PAGE_SIZE, true);
        PinnedPages pins = p.pinUserPages(a + 100, 10 * PAGE_SIZE, true); // unaligned: 11 pages
        assertEquals(11, pins.npages());
        assertEquals(11, p.pinnedPages());
        assertErrno(Errno.ENOMEM, () -> p.pinUserPages(a, 8 * PAGE_SIZE, true));
        assertEquals(11, p.pinnedPages(), "a refused pin charges nothing");

        try (Arena arena = Arena.ofConfined()) {
            MemorySegment bar = arena.allocate(4 * PAGE_SIZE, PAGE_SIZE);
            long d = p.mmapDevice(0, bar, Vma.PROT_READ | Vma.PROT_WRITE, "gpu-window");
            p.writeLong(d + 16, 99);
            assertEquals(99, bar.get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 16), "CPU reaches device memory");
            KernelException e = assertThrows(KernelException.class, () -> p.pinUserPages(d, PAGE_SIZE, false));
            assertEquals(Errno.EFAULT, e.errno());
            assertTrue(e.getMessage().contains("VM_IO|VM_PFNMAP"), e.getMessage());
            p.munmap(d, 4 * PAGE_SIZE);
        }
        assertEquals(11, p.pinnedPages());

        // pinned pages are neither paged out nor migrated, and survive munmap until unpinned
        assertEquals(32 - 11, p.madvise(a, 32 * PAGE_SIZE, AddressSpace.Advice.MADV_PAGEOUT));
        assertEquals(0, p.migrate(a, 11 * PAGE_SIZE));
        long pinnedPfn = pins.pfn(0);
        p.writeLong(a, 5);
        p.munmap(a, 32 * PAGE_SIZE);
        assertFalse(PhysicalMemory.of(m).isFree(pinnedPfn), "a pinned frame stays allocated after munmap");
        assertEquals(5, PhysicalMemory.of(m).readLong(pinnedPfn, 0));
        pins.unpin(true);
        assertTrue(PhysicalMemory.of(m).isFree(pinnedPfn), "freed at unpin");
        assertEquals(0, p.pinnedPages());
        assertErrno(Errno.EINVAL, () -> pins.unpin(true));
        assertEquals(0, p.pinnedPages(), "a double unpin changes nothing");
    }

    @Test
    void pageoutSwapsToTheFileAndFaultsBackWithData() {
        Mm m = mm(64 << 20, 16 << 20);
        AddressSpace p = m.createProcess("t");
        long a = p.mmap(64 * PAGE_SIZE);
        for (int i = 0; i < 64; i++) {
            p.writeLong(a + i * PAGE_SIZE + 8, i * 1000L + 1);
        }
        assertEquals(64, p.madvise(a, 64 * PAGE_SIZE, AddressSpace.Advice.MADV_PAGEOUT));
        assertEquals(0, p.rssPages());
        assertEquals(64, p.swappedPages());
        assertEquals(64, m.swapSlotsInUse());
        for (int i = 0; i < 64; i++) {
            assertEquals(i * 1000L + 1, p.readLong(a + i * PAGE_SIZE + 8));
        }
        assertEquals(0, m.swapSlotsInUse(), "swap slots are freed at swap-in");
        p.madvise(a, 64 * PAGE_SIZE, AddressSpace.Advice.MADV_DONTNEED);
        assertEquals(0, p.readLong(a + 8), "DONTNEED: anonymous pages come back zeroed");
    }

    @Test
    void migrationMovesFramesAndKeepsData() {
        Mm m = mm(64 << 20, 16 << 20);
        AddressSpace p = m.createProcess("t");
        long a = p.mmap(16 * PAGE_SIZE);
        for (int i = 0; i < 16; i++) {
            p.writeLong(a + i * PAGE_SIZE, ~i);
        }
        long before = p.pfnOf(a);
        assertEquals(16, p.migrate(a, 16 * PAGE_SIZE));
        assertNotEquals(before, p.pfnOf(a));
        assertTrue(PhysicalMemory.of(m).isFree(before));
        for (int i = 0; i < 16; i++) {
            assertEquals(~i, p.readLong(a + i * PAGE_SIZE));
        }
    }

    @Test
    void hugeTlbMappingsUseContiguous2MiBFrames() {
        Mm m = mm(64 << 20, 16 << 20);
        AddressSpace p = m.createProcess("t");
        long a = p.mmap(0, 4 << 20, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "huge");
        assertEquals(0, a & ((2 << 20) - 1));
        p.writeLong(a + 12345 * 8, 77);
        assertEquals(512, p.rssPages());
        assertEquals(1, PhysicalMemory.of(m).hugePagesInUse());
        long head = p.pfnOf(a);
        assertEquals(0, head & 511, "a huge page starts on a 2 MiB frame boundary");
        assertEquals(head + 3, p.pfnOf(a + 3 * PAGE_SIZE), "contiguous frames");
        assertErrno(Errno.EINVAL, () -> p.munmap(a, PAGE_SIZE));
        p.munmap(a, 4 << 20);
        assertEquals(0, PhysicalMemory.of(m).hugePagesInUse());
    }

    @Test
    void notifiersRunBeforeEntriesChangeAndSeeTheEvent() {
        Mm m = mm(64 << 20, 16 << 20);
        AddressSpace p = m.createProcess("t");
        long a = p.mmap(16 * PAGE_SIZE);
        p.writeLong(a, 1);
        // the frame backing a when the next operation starts; the callback must still find it allocated
        AtomicLong pfn = new AtomicLong(p.pfnOf(a));
        List<MmuNotifierEvent> seen = new ArrayList<>();
        List<String> problems = new ArrayList<>();
        MmuIntervalNotifier n = p.insertNotifier(a, 2 * PAGE_SIZE, (nn, range, seq) -> {
            nn.setSeq(seq);
            seen.add(range.event());
            if (pfn.get() >= 0 && PhysicalMemory.of(m).isFree(pfn.get())) {
                problems.add("frame already freed during " + range.event());
            }
            return true;
        });
        MmuIntervalNotifier other = p.insertNotifier(a + 8 * PAGE_SIZE, PAGE_SIZE, (nn, r, s) -> {
            problems.add("a notifier outside the range was called for " + r.event());
            return true;
        });
        long seq = n.readBegin();
        assertFalse(n.readRetry(seq));
        p.mprotect(a, PAGE_SIZE, Vma.PROT_READ);
        assertTrue(n.readRetry(seq), "an invalidation since readBegin forces a retry");
        p.madvise(a + 2 * PAGE_SIZE, PAGE_SIZE, AddressSpace.Advice.MADV_DONTNEED); // outside: not called
        p.migrate(a, PAGE_SIZE);
        pfn.set(p.pfnOf(a));
        p.madvise(a, PAGE_SIZE, AddressSpace.Advice.MADV_PAGEOUT);
        assertEquals(1, p.readLong(a), "back from swap with its data");
        pfn.set(p.pfnOf(a));
        p.munmap(a, PAGE_SIZE);
        assertEquals(List.of(MmuNotifierEvent.PROTECTION_VMA, MmuNotifierEvent.MIGRATE, MmuNotifierEvent.CLEAR,
                MmuNotifierEvent.UNMAP), seen);
        other.remove();
        n.remove();
        assertErrno(Errno.EINVAL, n::remove);
        p.exit();
        assertEquals(4, seen.size(), "removed notifiers are not called at exit");
        assertTrue(problems.isEmpty(), problems::toString);
    }

    @Test
    void readBeginWaitsForARunningInvalidation() throws Exception {
        Mm m = mm(64 << 20, 16 << 20);
        AddressSpace p = m.createProcess("t");
        long a = p.mmap(4 * PAGE_SIZE);
        p.writeLong(a, 1);
        CountDownLatch inCallback = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        MmuIntervalNotifier n = p.insertNotifier(a, 4 * PAGE_SIZE, (nn, r, seq) -> {
            nn.setSeq(seq);
            inCallback.countDown();
            try {
                assertTrue(release.await(10, TimeUnit.SECONDS));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return true;
        });
        Thread unmapper = new Thread(() -> p.munmap(a, 4 * PAGE_SIZE));
        unmapper.start();
        assertTrue(inCallback.await(10, TimeUnit.SECONDS));
        AtomicLong begun = new AtomicLong(-1);
        CountDownLatch readerDone = new CountDownLatch(1);
        Thread reader = new Thread(() -> {
            begun.set(n.readBegin());
            readerDone.countDown();
        });
        reader.start();
        assertFalse(readerDone.await(200, TimeUnit.MILLISECONDS), "readBegin must wait while the interval is invalidated");
        release.countDown();
        assertTrue(readerDone.await(10, TimeUnit.SECONDS));
        unmapper.join(10_000);
        assertFalse(n.readRetry(begun.get()), "the sequence read after the invalidation is current");
        n.remove();
    }

    @Test
    void hmmRangeFaultSnapshotsFaultsAndReportsRetries() {
        Mm m = mm(64 << 20, 16 << 20);
        AddressSpace p = m.createProcess("t");
        long a = p.mmap(8 * PAGE_SIZE);
        p.writeLong(a, 1);
        MmuIntervalNotifier n = p.insertNotifier(a, 8 * PAGE_SIZE, (nn, r, seq) -> {
            nn.setSeq(seq);
            return true;
        });
        HmmRange snap = new HmmRange(n, a, a + 4 * PAGE_SIZE, 0);
        snap.notifierSeq = n.readBegin();
        p.hmmRangeFault(snap);
        assertEquals(p.pfnOf(a), HmmRange.pfn(snap.hmmPfns[0]));
        assertTrue((snap.hmmPfns[0] & HmmRange.HMM_PFN_VALID) != 0);
        assertEquals(0, snap.hmmPfns[1], "snapshot: a missing page is not faulted");

        HmmRange w = new HmmRange(n, a, a + 4 * PAGE_SIZE, HmmRange.HMM_PFN_REQ_FAULT | HmmRange.HMM_PFN_REQ_WRITE);
        w.notifierSeq = n.readBegin();
        p.hmmRangeFault(w);
        for (long e : w.hmmPfns) {
            assertTrue((e & HmmRange.HMM_PFN_VALID) != 0 && (e & HmmRange.HMM_PFN_WRITE) != 0);
            assertEquals(0, HmmRange.order(e));
        }
        assertEquals(4, p.rssPages());

        HmmRange stale = new HmmRange(n, a, a + PAGE_SIZE, HmmRange.HMM_PFN_REQ_FAULT);
        stale.notifierSeq = n.readBegin();
        p.madvise(a, PAGE_SIZE, AddressSpace.Advice.MADV_DONTNEED);
        assertErrno(Errno.EBUSY, () -> p.hmmRangeFault(stale));

        p.mprotect(a + 4 * PAGE_SIZE, PAGE_SIZE, Vma.PROT_READ);
        HmmRange ro = new HmmRange(n, a + 4 * PAGE_SIZE, a + 5 * PAGE_SIZE, HmmRange.HMM_PFN_REQ_FAULT | HmmRange.HMM_PFN_REQ_WRITE);
        ro.notifierSeq = n.readBegin();
        assertErrno(Errno.EPERM, () -> p.hmmRangeFault(ro));
        p.munmap(a + 6 * PAGE_SIZE, 2 * PAGE_SIZE);
        HmmRange hole = new HmmRange(n, a + 6 * PAGE_SIZE, a + 7 * PAGE_SIZE, HmmRange.HMM_PFN_REQ_FAULT);
        hole.notifierSeq = n.readBegin();
        assertErrno(Errno.EFAULT, () -> p.hmmRangeFault(hole));
        assertErrno(Errno.EINVAL, () -> new HmmRange(n, a + 1, a + PAGE_SIZE, 0));
        n.remove();
    }

    @Test
    void memoryPressureReclaimsBeforeItFailsAndPinnedMemoryFailsClearly() {
        Mm m = mm(2 << 20, 4 << 20); // 512 frames, 1024 swap slots
        AddressSpace hog = m.createProcess("hog");
        long a = hog.mmap(3 << 20); // more than physical memory
        for (long off = 0; off < (3 << 20); off += PAGE_SIZE) {
            hog.writeLong(a + off, off);
        }
        assertTrue(m.reclaimedPages() > 0, "reclaim ran");
        for (long off = 0; off < (3 << 20); off += PAGE_SIZE) {
            assertEquals(off, hog.readLong(a + off));
        }
        hog.munmap(a, 3 << 20);
        AddressSpace pinner = m.createProcess("pinner");
        pinner.setMemlockLimit(1L << 40);
        long b = pinner.mmap(4 << 20);
        KernelException e = assertThrows(KernelException.class, () -> pinner.pinUserPages(b, 4 << 20, true));
        assertEquals(Errno.ENOMEM, e.errno());
        assertTrue(e.getMessage().contains("out of memory"), e.getMessage());
        assertEquals(0, pinner.pinnedPages(), "the failed pin was undone");
        assertEquals(0, PhysicalMemory.of(m).count(pfn -> PhysicalMemory.of(m).pinCount(pfn) != 0));
    }

    @Test
    void buddyAllocatorMergesFreedBlocks() {
        PhysicalMemory pm = new PhysicalMemory(8 << 20, true);
        try {
            List<Long> pfns = new ArrayList<>();
            for (int i = 0; i < pm.nrFrames(); i++) {
                pfns.add(pm.allocPages(0, PhysicalMemory.KERNEL, 0));
            }
            assertEquals(0, pm.freeFrames());
            assertErrno(Errno.ENOMEM, () -> pm.allocPages(0, PhysicalMemory.KERNEL, 0));
            for (long pfn : pfns) {
                pm.freePages(pfn, 0);
            }
            long big = pm.allocPages(PhysicalMemory.MAX_ORDER, PhysicalMemory.KERNEL, 0);
            assertEquals(0, big % (1 << PhysicalMemory.MAX_ORDER));
            assertErrno(Errno.EINVAL, () -> pm.freePages(big, 0));
            pm.freePages(big, PhysicalMemory.MAX_ORDER);
            assertErrno(Errno.EINVAL, () -> pm.freePages(big, PhysicalMemory.MAX_ORDER));
            assertEquals(pm.nrFrames(), pm.freeFrames());
        } finally {
            pm.close();
        }
    }

    /** A driver's page allocator reaches its own blocks only: never a process's frame. */
    @Test
    void kernelPageAllocatorServesDriversAndRefusesProcessPages() {
        Mm m = mm(8 << 20, 1 << 20);
        long free = m.freeFrames();
        long head = m.allocPages(3);
        assertEquals(free - 8, m.freeFrames());
        MemorySegment seg = m.pageAddress(head, 3);
        assertEquals(8 * PAGE_SIZE, seg.byteSize());
        assertEquals(0, seg.get(ValueLayout.JAVA_LONG, 0), "alloc_pages hands out zeroed memory");
        seg.set(ValueLayout.JAVA_LONG, 8 * PAGE_SIZE - 8, 42);
        assertErrno(Errno.EINVAL, () -> m.pageAddress(head, 2)); // wrong order
        assertErrno(Errno.EINVAL, () -> m.freePages(head + 1, 0)); // not a head
        assertErrno(Errno.EINVAL, () -> m.pageAddress(-1, 0));
        assertErrno(Errno.EINVAL, () -> m.pageAddress(m.totalFrames() - 1, 3));

        AddressSpace p = m.createProcess("victim");
        long va = p.mmap(PAGE_SIZE);
        p.writeLong(va, 7);
        long pfn = p.pfnOf(va);
        KernelException e = assertThrows(KernelException.class, () -> m.pageAddress(pfn, 0));
        assertTrue(e.getMessage().contains("not a block allocated by alloc_pages"), e.getMessage());
        assertErrno(Errno.EINVAL, () -> m.freePages(pfn, 0));
        assertEquals(7, p.readLong(va), "the refused calls left the process's page alone");
        p.exit();

        m.freePages(head, 3);
        assertEquals(free, m.freeFrames());
        assertErrno(Errno.EINVAL, () -> m.freePages(head, 3)); // double free
    }
}
