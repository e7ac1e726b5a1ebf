package org.peerdirect.kernel.iommu;

import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.BitSet;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.StampedLock;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;
import org.peerdirect.kernel.pci.BarAperture;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One device's IOMMU domain: a page table from I/O virtual pages to frames. Two faces: the
 * driver's mapping calls ({@link DmaMapper}: {@code dma_map_sg}, {@code dma_unmap}, {@link #dmaMapResource})
 * and the device's accesses ({@link DmaPort}); a device model is handed only the latter. IOVAs start at {@link #IOVA_BASE}; the space holds {@link #IOVA_PAGES} pages.
 *
 * <p>Invariant (the promise the system proves): once {@link #dmaUnmap} returns, no DMA through
 * that mapping is in flight or will ever happen. DMA accesses hold the domain lock in read mode,
 * map and unmap hold it in write mode. Each mapping remembers the frame's generation: a frame
 * freed and reused since is caught as use-after-free instead of being read or written.
 */
public final class IommuDomain implements DmaMapper, DmaPort {

    public static final long IOVA_BASE = 0x100000000L;
    /** 2^24 pages: 64 GiB of I/O virtual space per domain. */
    public static final int IOVA_PAGES = 1 << 24;

    private static final long VALID = 1;
    private static final long DEV_READ = 2;
    private static final long DEV_WRITE = 4;
    /** The entry maps a page of another PCI function's BAR ({@code dma_map_resource}), not a frame. */
    private static final long RESOURCE = 8;
    /** A 2 MiB entry: the whole 512-page leaf maps one huge page ({@link #supers}). */
    private static final long SUPER = 16;
    /** IOVA pages per 2 MiB superpage entry: one table leaf. */
    private static final int SUPER_PAGES = 512;
    private static final VarHandle LONG_AT = ValueLayout.JAVA_LONG.varHandle();

    private final Iommu iommu;
    private final String name;
    private final PhysicalMemory phys;
    private final MemorySegment memory;
    private final StampedLock lock = new StampedLock();
    /** Guarded by lock: entries (pfn << 12 | flags) and generations, per 512-page leaf. */
    private final long[][] entries = new long[IOVA_PAGES / 512][];
    private final int[][] gens = new int[IOVA_PAGES / 512][];
    /**
     * Guarded by lock: per leaf, a 2 MiB entry (head pfn << 12 | flags | SUPER) or 0, as an
     * IOMMU's second-level entry with its page-size bit. Invariant: a leaf with a 2 MiB entry has
     * no 4 KiB leaf ({@code entries[l] == null}), so {@link #entry} still reads one array on the
     * common path; its generation is the head frame's, kept in {@code gens[l][0]}. A leaf with
     * neither maps nothing ({@link #fill} makes its 4 KiB leaf again when needed). A 2 MiB entry
     * holds one DMA reference, on the head frame: a huge page is allocated and freed whole
     * (hugetlb pages never split), so the head's count and generation speak for its 512 frames.
     */
    private final long[] supers = new long[IOVA_PAGES / 512];
    /** Guarded by lock: leaves mapped by a 2 MiB entry. */
    private long superpages;
    /** Guarded by lock: for RESOURCE entries, the BAR they map (the entry holds the page within it). */
    private final Resource[][] resources = new Resource[IOVA_PAGES / 512][];
    /** Guarded by lock: IOVA pages allocated, mapped or in a range of {@link #dmaIovaTryAlloc}; {@link #usedPages} counts them. */
    private final BitSet used = new BitSet();
    /** Guarded by lock: the ranges of {@link #dmaIovaTryAlloc} (linked or not): first page → pages. */
    private final java.util.TreeMap<Integer, Integer> iovaRanges = new java.util.TreeMap<>();
    private int hint;
    /** Guarded by lock: pages with an entry (what DMA can reach). */
    private long mapped;
    private long usedPages;
    /** The largest range {@link #dmaIovaTryAlloc} reserves: 256 MiB. */
    public static final int IOVA_RANGE_MAX_PAGES = 1 << 16;
    private volatile boolean destroyed;
    private static final java.util.concurrent.atomic.AtomicLong ORDER = new java.util.concurrent.atomic.AtomicLong();
    /** Lock order among domains for {@link #copyTo}. */
    private final long order = ORDER.incrementAndGet();
    final AtomicLong faults = new AtomicLong();
    final AtomicLong useAfterFree = new AtomicLong();
    // LongAdders: every DMA of every queue pair counts here, so no single contended word
    final java.util.concurrent.atomic.LongAdder bytesRead = new java.util.concurrent.atomic.LongAdder();
    final java.util.concurrent.atomic.LongAdder bytesWritten = new java.util.concurrent.atomic.LongAdder();
    /** Bytes this device moved to or from another function's BAR (peer to peer), part of the two above. */
    final java.util.concurrent.atomic.LongAdder barBytes = new java.util.concurrent.atomic.LongAdder();

    IommuDomain(Iommu iommu, String name, PhysicalMemory phys) {
        this.iommu = iommu;
        this.name = name;
        this.phys = phys;
        this.memory = phys.memory();
    }

    @Override
    public String name() {
        return name;
    }

    /**
     * A mapped BAR range of a PCI function: its memory, or (aperture BAR) the resolver of its
     * pages; valid while the function is present.
     */
    private record Resource(PciFunction fn, int bar, MemorySegment memory, BarAperture aperture) {
    }

    /**
     * {@code dma_map_resource} / {@code pci_p2pdma_map}: maps [offset, offset+length) of BAR
     * {@code bar} of function {@code fn} (another device, e.g. a GPU's BAR1 or an SSD's memory
     * window) into this domain, so this device's DMA reaches that device's memory peer to peer.
     * Audited like frames: a DMA after {@link #dmaUnmap} is a fault; a DMA after the function was
     * removed, or to an aperture page its device has unmapped since, is a use-after-free. Offset
     * and length are page-aligned.
     *
     * @throws KernelException EINVAL for a bad range or BAR, ENODEV when the function is gone,
     *                         ENOMEM when the IOVA space is full
     */
    @Override
    public long dmaMapResource(PciFunction fn, int bar, long offset, long length, DmaDirection dir) {
        if (!fn.present()) {
            throw new KernelException(Errno.ENODEV, "dma_map_resource: function " + fn.bdf() + " was removed");
        }
        MemorySegment barMemory = null;
        BarAperture aperture;
        long size;
        try {
            aperture = fn.barAperture(bar);
            size = fn.barSize(bar);
            if (aperture == null) {
                barMemory = fn.barMemory(bar);
            }
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new KernelException(Errno.EINVAL, "dma_map_resource: " + fn.bdf() + " BAR " + bar + ": " + e.getMessage());
        }
        if (length <= 0 || offset < 0 || (offset & (PAGE_SIZE - 1)) != 0 || (length & (PAGE_SIZE - 1)) != 0
                || offset + length > size) {
            throw new KernelException(Errno.EINVAL, String.format(
                    "dma_map_resource: %s BAR %d range 0x%x+0x%x is not page-aligned inside the BAR's 0x%x bytes", fn.bdf(), bar, offset,
                    length, size));
        }
        if (length >>> PAGE_SHIFT > IOVA_PAGES) {
            throw new KernelException(Errno.ENOMEM, "dma_map_resource of 0x" + Long.toHexString(length) + " bytes: larger than the IOVA space of " + name);
        }
        int n = (int) (length >>> PAGE_SHIFT);
        Resource r = new Resource(fn, bar, barMemory, aperture);
        long flags = VALID | RESOURCE | (dir.deviceReads ? DEV_READ : 0) | (dir.deviceWrites ? DEV_WRITE : 0);
        long stamp = lock.writeLock();
        try {
            checkAlive();
            int first = reserve(n);
            for (int i = 0; i < n; i++) {
                int page = first + i;
                if (resources[page >>> 9] == null) {
                    resources[page >>> 9] = new Resource[512];
                }
                entries[page >>> 9][page & 511] = (((offset >>> PAGE_SHIFT) + i) << PAGE_SHIFT) | flags;
                resources[page >>> 9][page & 511] = r;
            }
            mapped += n;
            return IOVA_BASE + ((long) first << PAGE_SHIFT);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    /** {@code dma_map_page}: one frame; returns its IOVA. */
    @Override
    public long dmaMapPage(long pfn, DmaDirection dir) {
        return dmaMapSg(new long[] {pfn}, dir);
    }

    /**
     * {@code dma_map_sg} with an IOMMU: the frames become one contiguous IOVA range, in order.
     * Refuses free frames (mapping memory nobody owns is a bug) and a full IOVA space.
     */
    @Override
    public long dmaMapSg(long[] pfns, DmaDirection dir) {
        if (pfns.length == 0) {
            throw new KernelException(Errno.EINVAL, "dma_map_sg of an empty list");
        }
        long stamp = lock.writeLock();
        try {
            checkAlive();
            int[] gen = generations(pfns, pfns.length, "dma_map");
            int first = reserve(pfns.length);
            fill(first, pfns, gen, pfns.length, dir);
            return IOVA_BASE + ((long) first << PAGE_SHIFT);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    /**
     * The generations of frames {@code pfns[0..n)}, each checked to be allocated; caller holds
     * the write lock. The generation is read before the free check: a frame freed after the check
     * has a newer generation than the one recorded, so translatePage sees the free without
     * looking at the frame's kind (every free advances the generation).
     */
    private int[] generations(long[] pfns, int n, String fn) {
        assert lock.isWriteLocked();
        int[] gen = new int[n];
        for (int i = 0; i < n; i++) {
            long pfn = pfns[i];
            if (pfn < 0 || pfn >= phys.nrFrames()) {
                throw new KernelException(Errno.EINVAL, fn + " of pfn " + pfn + ": not an allocated frame");
            }
            gen[i] = phys.generation(pfn);
            if (phys.isFree(pfn)) {
                throw new KernelException(Errno.EINVAL, fn + " of pfn " + pfn + ": not an allocated frame");
            }
        }
        return gen;
    }

    /**
     * Writes the entries of pages first..first+n for frames pfns[0..n) and counts them mapped;
     * caller holds the write lock and has checked the pages are unmapped. Where a whole leaf
     * (512-aligned IOVA pages) receives the 512 frames of one huge page in order, it writes one
     * 2 MiB entry instead, as {@code iommu_map} picks the largest page size the IOVA and the
     * physical address are both aligned to ({@code iommu_pgsize}).
     */
    private void fill(int first, long[] pfns, int[] gen, int n, DmaDirection dir) {
        assert lock.isWriteLocked();
        long flags = VALID | (dir.deviceReads ? DEV_READ : 0) | (dir.deviceWrites ? DEV_WRITE : 0);
        for (int i = 0; i < n; ) {
            int page = first + i;
            int l = page >>> 9;
            if ((page & (SUPER_PAGES - 1)) == 0 && n - i >= SUPER_PAGES && hugePageAt(pfns, i)) {
                entries[l] = null;
                supers[l] = (pfns[i] << PAGE_SHIFT) | flags | SUPER;
                gens[l][0] = gen[i];
                phys.dmaRef(pfns[i], 1);
                superpages++;
                i += SUPER_PAGES;
                continue;
            }
            if (entries[l] == null) { // a leaf whose 2 MiB entry was unmapped, in a range still reserved
                entries[l] = new long[512];
            }
            entries[l][page & 511] = (pfns[i] << PAGE_SHIFT) | flags;
            gens[l][page & 511] = gen[i];
            phys.dmaRef(pfns[i], 1);
            i++;
        }
        mapped += n;
    }

    /** Whether pfns[i..i+512) are the frames of one huge page (a block of order ≥ 9 from its head), in order. */
    private boolean hugePageAt(long[] pfns, int i) {
        long head = pfns[i];
        if ((head & (SUPER_PAGES - 1)) != 0 || phys.order(head) < PhysicalMemory.HPAGE_ORDER) {
            return false;
        }
        for (int k = 1; k < SUPER_PAGES; k++) {
            if (pfns[i + k] != head + k) {
                return false;
            }
        }
        return true;
    }

    /**
     * {@code dma_iova_try_alloc}: reserves {@code size} bytes (rounded up to pages) of contiguous
     * I/O virtual space with nothing mapped in it. Returns -1 where the kernel returns false and
     * the caller maps page by page: here for a range above {@link #IOVA_RANGE_MAX_PAGES} pages or
     * one that would leave less than half of the space free, or on a destroyed domain (this space is 64 GiB, not the 48 bits
     * of a real IOMMU, and long-lived reservations must not starve {@code dma_map_sg}).
     */
    @Override
    public long dmaIovaTryAlloc(long size) {
        if (size <= 0) {
            throw new KernelException(Errno.EINVAL, "dma_iova_try_alloc of " + size + " bytes");
        }
        long pages = (size + PAGE_SIZE - 1) >>> PAGE_SHIFT;
        if (pages > IOVA_RANGE_MAX_PAGES) {
            return -1;
        }
        int n = (int) pages;
        long stamp = lock.writeLock();
        try {
            if (destroyed || usedPages + n > IOVA_PAGES / 2) { // a destroyed domain: the caller's first map names it
                return -1;
            }
            int first = findRange(n);
            if (first < 0) {
                return -1;
            }
            reserveAt(first, n);
            iovaRanges.put(first, n);
            return IOVA_BASE + ((long) first << PAGE_SHIFT);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    @Override
    public void dmaIovaLink(long iova, long[] pfns, int n, DmaDirection dir) {
        if (n <= 0 || n > pfns.length) {
            throw new KernelException(Errno.EINVAL, "dma_iova_link of " + n + " of " + pfns.length + " frames");
        }
        long stamp = lock.writeLock();
        try {
            checkAlive();
            int first = page(iova, n);
            checkRangePages("dma_iova_link", iova, first, n, false);
            fill(first, pfns, generations(pfns, n, "dma_iova_link"), n, dir);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    /**
     * EINVAL naming the first of pages first..first+n that lies outside the IOVA range holding the
     * first one or is not linked ({@code linked}) / already linked (otherwise); caller holds the write lock. Walks the
     * table a leaf at a time: a leaf with a 2 MiB entry is linked throughout, one with neither
     * entry nor 4 KiB leaf is linked nowhere, so a 2 MiB granule costs one look, not 512.
     */
    private void checkRangePages(String fn, long iova, int first, int n, boolean linked) {
        assert lock.isWriteLocked();
        int end = first + n;
        // the range holding the first page: pages past its end are outside (a link or unlink stays in one range)
        java.util.Map.Entry<Integer, Integer> range = iovaRanges.floorEntry(first);
        int outside = range == null ? first : Math.max(first, Math.min(end, range.getKey() + range.getValue()));
        for (int page = first; page < end; ) {
            int l = page >>> 9;
            int leafEnd = Math.min(end, (l + 1) << 9);
            int wrong = -1;
            if (supers[l] != 0 || entries[l] == null) {
                wrong = (supers[l] != 0) != linked ? page : -1;
            } else {
                for (int q = page; q < leafEnd && wrong < 0; q++) {
                    wrong = (entries[l][q & 511] != 0) != linked ? q : -1;
                }
            }
            if (outside < leafEnd || wrong >= 0) {
                int at = outside < leafEnd && (wrong < 0 || outside < wrong) ? outside : wrong;
                throw new KernelException(Errno.EINVAL, String.format("%s at iova 0x%x of domain %s: page %d of %d is %s", fn, iova, name, at - first, n,
                        at == outside ? "not in a range of dma_iova_try_alloc" : linked ? "not linked (double unlink?)" : "already linked"));
            }
            page = leafEnd;
        }
    }

    @Override
    public void dmaIovaUnlink(long iova, int npages) {
        long stamp = lock.writeLock();
        try {
            int first = page(iova, npages);
            checkRangePages("dma_iova_unlink", iova, first, npages, true);
            clear(first, npages);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    /** A destroyed domain took its ranges back already: freeing one then is nothing to do. */
    @Override
    public void dmaIovaFree(long iova, long size) {
        long stamp = lock.writeLock();
        try {
            if (destroyed) {
                return;
            }
            int n = (int) ((size + PAGE_SIZE - 1) >>> PAGE_SHIFT);
            int first = page(iova, n);
            Integer had = iovaRanges.get(first);
            if (had == null || had != n) {
                throw new KernelException(Errno.EINVAL, String.format("dma_iova_free of iova 0x%x + %d bytes in domain %s: not a range of dma_iova_try_alloc%s",
                        iova, size, name, had == null ? "" : " (that range has " + had + " pages)"));
            }
            int linkedPage = firstEntry(first, first + n);
            if (linkedPage >= 0) {
                throw new KernelException(Errno.EBUSY, String.format("dma_iova_free of iova 0x%x in domain %s: page %d of %d is still linked",
                        iova, name, linkedPage - first, n));
            }
            iovaRanges.remove(first);
            unreserve(first, n);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    /** The first page of [from, to) that lies in a range of {@link #dmaIovaTryAlloc}, or -1. Caller holds the write lock. */
    private int firstRangePage(int from, int to) {
        assert lock.isWriteLocked();
        java.util.Map.Entry<Integer, Integer> r = iovaRanges.floorEntry(from);
        if (r != null && r.getKey() + r.getValue() > from) {
            return from;
        }
        Integer next = iovaRanges.ceilingKey(from);
        return next != null && next < to ? next : -1;
    }

    /** The first page of [from, to) with an entry, or -1; skips leaves that map nothing. Caller holds the write lock. */
    private int firstEntry(int from, int to) {
        assert lock.isWriteLocked();
        for (int page = from; page < to; ) {
            int l = page >>> 9;
            int leafEnd = Math.min(to, (l + 1) << 9);
            if (supers[l] != 0) {
                return page;
            }
            if (entries[l] != null) {
                for (int q = page; q < leafEnd; q++) {
                    if (entries[l][q & 511] != 0) {
                        return q;
                    }
                }
            }
            page = leafEnd;
        }
        return -1;
    }

    private void checkAlive() {
        if (destroyed) {
            throw new KernelException(Errno.EINVAL, "IOMMU domain " + name + " is destroyed");
        }
    }

    /**
     * Reserves {@code n} consecutive IOVA pages with their table leaves; the caller fills their
     * entries ({@link #fill}) before it releases the write lock, or keeps them as an IOVA range.
     * ENOMEM when no range is free.
     */
    private int reserve(int n) {
        assert lock.isWriteLocked();
        int first = findRange(n);
        if (first < 0) {
            throw new KernelException(Errno.ENOMEM, "IOVA space of domain " + name + " is full (" + usedPages + " pages allocated, " + mapped + " mapped)");
        }
        reserveAt(first, n);
        return first;
    }

    private void reserveAt(int first, int n) {
        assert lock.isWriteLocked();
        for (int leaf = first >>> 9; leaf <= (first + n - 1) >>> 9; leaf++) {
            if (entries[leaf] == null) {
                entries[leaf] = new long[512];
                gens[leaf] = new int[512];
            }
        }
        used.set(first, first + n);
        hint = first + n;
        usedPages += n;
    }

    private void unreserve(int first, int n) {
        assert lock.isWriteLocked();
        used.clear(first, first + n);
        usedPages -= n;
    }

    /**
     * The first free run of {@code n} IOVA pages from the hint, then from 0; a run of 2 MiB or more
     * starts on a 2 MiB boundary, as the kernel's IOVA allocator aligns a range to its size
     * ({@code alloc_iova}'s {@code size_aligned}, capped here at 2 MiB), so a huge page mapped
     * into it can take a 2 MiB entry. -1 when none is free.
     */
    private int findRange(int n) {
        int align = n >= SUPER_PAGES ? SUPER_PAGES : 1;
        for (int pass = 0; pass < 2; pass++) {
            int from = pass == 0 ? hint : 0;
            int s = alignUp(used.nextClearBit(from), align);
            while (s + n <= IOVA_PAGES) {
                int next = used.nextSetBit(s);
                if (next < 0 || next >= s + n) {
                    return s;
                }
                s = alignUp(used.nextClearBit(next), align);
            }
        }
        return -1;
    }

    private static int alignUp(int page, int align) {
        return (page + align - 1) & -align;
    }

    /**
     * {@code dma_unmap_page} / {@code dma_unmap_sg} of {@code npages} from {@code iova}; waits
     * for DMA in flight in this domain, so none happens through it after the return.
     */
    @Override
    public void dmaUnmap(long iova, int npages) {
        long stamp = lock.writeLock();
        try {
            int first = page(iova, npages);
            int inRange = firstRangePage(first, first + npages);
            for (int i = 0; i < npages; i++) {
                if (!used.get(first + i)) {
                    throw new KernelException(Errno.EINVAL, String.format(
                            "dma_unmap of iova 0x%x in domain %s: page %d of %d is not mapped (double unmap?)", iova, name, i, npages));
                }
                if (first + i == inRange) {
                    throw new KernelException(Errno.EINVAL, String.format(
                            "dma_unmap of iova 0x%x in domain %s: page %d of %d lies in a range of dma_iova_try_alloc (dma_iova_unlink it)",
                            iova, name, i, npages));
                }
            }
            clear(first, npages);
            unreserve(first, npages);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    /**
     * Clears the entries of pages first..first+n, each mapped, and counts them unmapped: a 2 MiB
     * entry the pages cover whole goes in one step, one they cover in part is split into its 512
     * 4 KiB entries first (as unmapping part of a superpage splits it). Caller holds the write lock.
     */
    private void clear(int first, int n) {
        assert lock.isWriteLocked();
        int end = first + n;
        for (int page = first; page < end; ) {
            int l = page >>> 9;
            if (supers[l] != 0) {
                if ((page & (SUPER_PAGES - 1)) == 0 && end - page >= SUPER_PAGES) {
                    phys.dmaRef(supers[l] >>> PAGE_SHIFT, -1);
                    supers[l] = 0;
                    superpages--;
                    page += SUPER_PAGES;
                    continue;
                }
                split(l);
            }
            release(page);
            page++;
        }
        mapped -= n;
    }

    /**
     * Replaces leaf {@code l}'s 2 MiB entry by its 512 4 KiB entries, each frame with its own DMA
     * reference and generation. The generations are the frames' now less the head's advance since
     * the mapping: equal to what a 4 KiB mapping would have recorded while the huge page was not
     * freed, stale for every page if it was. Caller holds the write lock.
     */
    private void split(int l) {
        assert lock.isWriteLocked();
        long s = supers[l];
        long head = s >>> PAGE_SHIFT;
        long flags = s & (PAGE_SIZE - 1) & ~SUPER;
        int advance = phys.generation(head) - gens[l][0];
        long[] leaf = new long[512];
        for (int i = 0; i < SUPER_PAGES; i++) {
            leaf[i] = ((head + i) << PAGE_SHIFT) | flags;
            gens[l][i] = phys.generation(head + i) - advance;
            phys.dmaRef(head + i, 1);
        }
        phys.dmaRef(head, -1);
        entries[l] = leaf;
        supers[l] = 0;
        superpages--;
    }

    /** Clears one 4 KiB entry: a frame loses its DMA reference, a BAR page its resource; caller holds the write lock. */
    private void release(int page) {
        long e = entries[page >>> 9][page & 511];
        entries[page >>> 9][page & 511] = 0;
        if ((e & RESOURCE) != 0) {
            resources[page >>> 9][page & 511] = null;
        } else {
            phys.dmaRef(e >>> PAGE_SHIFT, -1);
        }
    }

    private int page(long iova, long n) {
        long p = (iova - IOVA_BASE) >> PAGE_SHIFT;
        if ((iova & (PAGE_SIZE - 1)) != 0 || p < 0 || n <= 0 || p + n > IOVA_PAGES) {
            throw new KernelException(Errno.EINVAL, String.format("iova 0x%x + %d pages is not a mapped range of domain %s", iova, n, name));
        }
        return (int) p;
    }

    @Override
    public long mappedPages() {
        long stamp = lock.readLock();
        try {
            return mapped;
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /**
     * The entry of IOVA page {@code p} (0 ≤ p < IOVA_PAGES): 0 where nothing maps it; within a
     * 2 MiB entry, the page's frame with the entry's flags (SUPER among them). Caller holds the
     * lock or an optimistic stamp it validates.
     */
    private long entry(long p) {
        int l = (int) (p >>> 9);
        long[] leaf = entries[l];
        if (leaf != null) {
            return leaf[(int) (p & 511)];
        }
        long s = supers[l];
        return s == 0 ? 0 : s + ((p & 511) << PAGE_SHIFT);
    }

    /** 2 MiB entries in this domain now (each also counts 512 pages in {@link #mappedPages}). */
    public long mappedSuperpages() {
        long stamp = lock.readLock();
        try {
            return superpages;
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /** Bit 0 of a translated page slot: the page is a BAR page of a resource mapping, not a frame. */
    private static final long SLOT_RESOURCE = 1;
    /**
     * Bit 1 with bit 0: the BAR is an aperture, its page is resolved again when bytes move (the
     * slot holds the page's offset in the BAR; the bytes are at the in-page offset of the page
     * the device maps there).
     */
    private static final long SLOT_APERTURE = 2;

    /**
     * Translates the page holding {@code iova} for an access needing {@code need} (DEV_READ and/or
     * DEV_WRITE): its page-aligned address in physical memory, or in its BAR with
     * {@link #SLOT_RESOURCE} set. Faults name {@code iova}. Caller holds the read lock.
     */
    private long translatePage(long iova, long need) {
        return translatePage(iova, need, phys.freedWhileDmaMapped() != 0);
    }

    /**
     * {@link #translatePage(long, long)} with the frame-generation check only when
     * {@code checkGeneration}: a transfer reads once whether any mapped frame was ever freed
     * ({@link PhysicalMemory#freedWhileDmaMapped}); while none was, every mapped frame is still the
     * one mapped (it cannot be freed without counting), and the per-page check is skipped.
     */
    private long translatePage(long iova, long need, boolean checkGeneration) {
        return translatePage(iova, need, checkGeneration, null, 0);
    }

    /**
     * {@link #translatePage(long, long, boolean)} that also keeps, in {@code resolved[at]} when
     * {@code resolved} is not null, the memory an aperture page was checked against (null for any
     * other page): the device is asked once per page, not once to check and again to copy.
     */
    private long translatePage(long iova, long need, boolean checkGeneration, MemorySegment[] resolved, int at) {
        long p = (iova - IOVA_BASE) >> PAGE_SHIFT;
        long e = p < 0 || p >= IOVA_PAGES ? 0 : entry(p);
        if ((e & VALID) == 0) {
            throw fault(IommuFault.Kind.NOT_MAPPED, iova, "no mapping");
        }
        if ((e & need) != need) {
            throw fault(IommuFault.Kind.PERMISSION, iova, "mapping does not allow the device to "
                    + ((need & ~e & DEV_WRITE) != 0 ? "write" : "read"));
        }
        if ((e & RESOURCE) != 0) {
            Resource r = resources[(int) (p >>> 9)][(int) (p & 511)];
            if (!r.fn().present()) {
                useAfterFree.incrementAndGet();
                throw fault(IommuFault.Kind.USE_AFTER_FREE, iova, "BAR " + r.bar() + " of " + r.fn().bdf() + " was removed after it was mapped");
            }
            if (r.aperture() != null) {
                MemorySegment page = r.aperture().page(e & -PAGE_SIZE);
                if (page == null || !page.scope().isAlive()) {
                    useAfterFree.incrementAndGet();
                    throw fault(IommuFault.Kind.USE_AFTER_FREE, iova, String.format(
                            "BAR %d page 0x%x of %s is no longer mapped by its device (its memory was taken back under this mapping)",
                            r.bar(), e & -PAGE_SIZE, r.fn().bdf()));
                }
                if (resolved != null) {
                    resolved[at] = page;
                }
                return (e & -PAGE_SIZE) | SLOT_RESOURCE | SLOT_APERTURE;
            }
            return (e & -PAGE_SIZE) | SLOT_RESOURCE;
        }
        long pfn = e >>> PAGE_SHIFT;
        // the frame was allocated when mapped and every free advances its generation: an equal
        // generation means not freed since (one read, no kind check); a 2 MiB entry keeps its
        // head's, and the huge page is freed whole
        boolean superpage = (e & SUPER) != 0;
        if (checkGeneration && phys.generation(superpage ? pfn & -SUPER_PAGES : pfn) != gens[(int) (p >>> 9)][superpage ? 0 : (int) (p & 511)]) {
            useAfterFree.incrementAndGet();
            throw fault(IommuFault.Kind.USE_AFTER_FREE, iova, "frame " + pfn + " was freed after it was mapped");
        }
        return pfn << PAGE_SHIFT;
    }

    /**
     * A BAR's memory was freed under a DMA in flight (its function removed between the check and
     * the copy): a use-after-free, counted like one.
     */
    private IommuFault barGone(long iova) {
        useAfterFree.incrementAndGet();
        return fault(IommuFault.Kind.USE_AFTER_FREE, iova, "a mapped BAR page was freed during the DMA (its function was removed, or its device took the page back)");
    }

    private IommuFault fault(IommuFault.Kind kind, long iova, String msg) {
        faults.incrementAndGet();
        iommu.faulted();
        return new IommuFault(kind, name, iova, msg);
    }

    // ------------------------------------------------------------------ the device side (DmaPort)
    //
    // A transfer translates every page of its range(s) once, into a per-thread slot array, before
    // any byte moves (all or nothing), then copies run by run: pages whose frames are consecutive
    // on both sides move in one MemorySegment.copy. The read lock of the domain(s) is held from the
    // first translation to the last byte, so the slots cannot go stale: an unmap waits for it.

    /** Per-thread translated pages of the transfer in progress: the data path allocates nothing. */
    private static final ThreadLocal<long[]> SLOTS = ThreadLocal.withInitial(() -> new long[64]);
    /**
     * Beside {@link #SLOTS}: for an aperture slot whose page translateAll resolved, the memory the
     * device returned for it (null otherwise), so the copy does not ask the device again. Valid for
     * one transfer under the read lock.
     */
    private static final ThreadLocal<MemorySegment[]> SEGS = ThreadLocal.withInitial(() -> new MemorySegment[64]);

    private static MemorySegment[] segs(int n) {
        MemorySegment[] s = SEGS.get();
        if (s.length < n) {
            s = java.util.Arrays.copyOf(s, Integer.highestOneBit(n) << 1); // keeps what a peer copy's source side resolved
            SEGS.set(s);
        }
        return s;
    }

    private static long[] slots(int n) {
        long[] s = SLOTS.get();
        if (s.length < n) {
            s = new long[Integer.highestOneBit(n) << 1];
            SLOTS.set(s);
        }
        return s;
    }

    /** Pages touched by [iova, iova+len), len > 0. */
    private static int pages(long iova, long len) {
        return (int) (((iova & (PAGE_SIZE - 1)) + len + PAGE_SIZE - 1) >>> PAGE_SHIFT);
    }

    /**
     * Checks and translates every page of [iova, iova+len) into {@code slots[at..]}; the first
     * refused page throws, before any byte moved. Caller holds the read lock. Returns the page count.
     */
    private int translateAll(long iova, long len, long need, long[] slots, int at) {
        int n = pages(iova, len);
        long base = iova & -PAGE_SIZE;
        boolean checkGeneration = phys.freedWhileDmaMapped() != 0;
        long first = (base - IOVA_BASE) >> PAGE_SHIFT;
        if (checkGeneration || first < 0 || first + n > IOVA_PAGES) {
            MemorySegment[] segs = segs(at + n);
            java.util.Arrays.fill(segs, at, at + n, null);
            for (int i = 0; i < n; i++) {
                slots[at + i] = translatePage(base + ((long) i << PAGE_SHIFT), need, checkGeneration, segs, at + i);
            }
            return n;
        }
        // the common case inline: a frame page with the rights needed is its address; anything
        // else (not mapped, no right, a BAR page) goes the full way, which also names the fault
        long want = VALID | need;
        long mask = want | RESOURCE;
        // an aperture page's memory may cover the following BAR pages of the same mapping (a GPU's
        // 64 KiB page): those are mapped and unmapped with it, so one resolution serves them all
        Resource covered = null;
        long coverFrom = 0;
        long coverTo = 0;
        MemorySegment[] segs = null; // made on the first aperture page: a transfer without one pays nothing
        for (int i = 0; i < n; i++) {
            long p = first + i;
            long e = entry(p);
            if ((e & mask) == want) {
                slots[at + i] = e & -PAGE_SIZE;
                continue;
            }
            if (covered != null && (e & mask) == (want | RESOURCE)) {
                long off = e & -PAGE_SIZE;
                if (off >= coverFrom && off < coverTo && resources[(int) (p >>> 9)][(int) (p & 511)] == covered) {
                    slots[at + i] = off | SLOT_RESOURCE | SLOT_APERTURE; // segs[at + i] stays null: resolved again if a copy starts here
                    continue;
                }
            }
            if (segs == null && (e & mask) == (want | RESOURCE)) {
                segs = segs(at + n);
                java.util.Arrays.fill(segs, at, at + n, null);
            }
            long slot = translatePage(base + ((long) i << PAGE_SHIFT), need, false, segs, at + i);
            slots[at + i] = slot;
            covered = null;
            if ((slot & SLOT_APERTURE) != 0) {
                Resource r = resources[(int) (p >>> 9)][(int) (p & 511)];
                MemorySegment page = segs[at + i];
                if (page.byteSize() > PAGE_SIZE) {
                    covered = r;
                    coverFrom = slot & -PAGE_SIZE;
                    coverTo = coverFrom + page.byteSize();
                }
            }
        }
        return n;
    }

    /**
     * Bytes from {@code iova} (in slot {@code i}) that lie consecutively in one segment, up to
     * {@code want}: through the following pages while their frames follow on.
     */
    private static long run(long[] slots, int i, int last, long iova, long want) {
        long r = PAGE_SIZE - (iova & (PAGE_SIZE - 1));
        if ((slots[i] & SLOT_RESOURCE) != 0) {
            return r;
        }
        while (r < want && i < last && slots[i + 1] == slots[i] + PAGE_SIZE) {
            r += PAGE_SIZE;
            i++;
        }
        return r;
    }

    /**
     * {@link #segment} of {@code slots[i]}, taking the memory translateAll already resolved for an
     * aperture slot (same thread, same transfer, read lock held).
     */
    private MemorySegment segmentAt(long[] slots, int i, long iova) {
        if ((slots[i] & SLOT_APERTURE) != 0) {
            MemorySegment[] segs = SEGS.get();
            MemorySegment known = i < segs.length ? segs[i] : null;
            if (known != null && known.scope().isAlive()) {
                return known;
            }
        }
        return segment(slots[i], iova);
    }

    /** Bytes one copy may move from {@code iova} (slot {@code i}, lying in {@code seg}): {@link #apertureRun} or {@link #run}. */
    private long runAt(MemorySegment seg, long[] slots, int i, int last, long iova, long want) {
        return (slots[i] & SLOT_APERTURE) != 0 ? apertureRun(seg, slots, i, last, iova, want) : run(slots, i, last, iova, want);
    }

    /**
     * Bytes from {@code iova} (in aperture slot {@code i}, whose page the device maps onto
     * {@code seg}) that one copy may move: through the following IOVA pages while translateAll
     * found them covered by the same resolution (consecutive BAR offsets, no resolution of their
     * own: {@link #translateAll} marks a page so only when it lies in the same mapping within the
     * memory the device returned), as far as {@code seg} reaches (a device returns memory beyond
     * the page only where it is contiguous behind the following BAR pages, e.g. the rest of a
     * GPU's 64 KiB page). Same thread and transfer as the translateAll, read lock held.
     */
    private static long apertureRun(MemorySegment seg, long[] slots, int i, int last, long iova, long want) {
        long in = iova & (PAGE_SIZE - 1);
        long max = seg.byteSize() - in;
        long r = PAGE_SIZE - in;
        MemorySegment[] segs = SEGS.get();
        while (r < want && r < max && i < last && slots[i + 1] == slots[i] + PAGE_SIZE && segs[i + 1] == null) {
            r += PAGE_SIZE;
            i++;
        }
        return Math.min(r, max);
    }

    /**
     * The segment a translated slot lies in (physical memory, a BAR, or the page an aperture BAR
     * maps now); caller holds the read lock. An aperture page unmapped since the translation
     * throws {@link IllegalStateException}, reported as a use-after-free like a BAR freed under
     * the DMA.
     */
    private MemorySegment segment(long slot, long iova) {
        if ((slot & SLOT_RESOURCE) == 0) {
            return memory;
        }
        long p = (iova - IOVA_BASE) >> PAGE_SHIFT;
        Resource r = resources[(int) (p >>> 9)][(int) (p & 511)];
        if ((slot & SLOT_APERTURE) == 0) {
            return r.memory();
        }
        MemorySegment page = r.aperture().page(slot & -PAGE_SIZE);
        if (page == null) {
            throw new IllegalStateException("aperture page unmapped during the DMA");
        }
        return page;
    }

    private static long address(long slot, long iova) {
        return ((slot & SLOT_APERTURE) != 0 ? 0 : slot & -PAGE_SIZE) | (iova & (PAGE_SIZE - 1));
    }

    /**
     * Device reads {@code len} bytes at iova into {@code dst}. All pages are checked before any
     * byte moves, so a faulting DMA moves nothing.
     */
    @Override
    public void read(long iova, MemorySegment dst, long dstOffset, long len) {
        if (len <= BOUNCE_SIZE && len > 0 && dstOffset >= 0 && dstOffset + len <= dst.byteSize() && readOptimistic(iova, dst, dstOffset, (int) len)) {
            bytesRead.add(len);
            return;
        }
        transfer(iova, dst, dstOffset, len, false);
        bytesRead.add(len);
    }

    /** The largest read {@link #readOptimistic} serves: a send WQE basic block or a CQE. */
    private static final int BOUNCE_SIZE = 64;
    private static final ThreadLocal<MemorySegment> BOUNCE = ThreadLocal.withInitial(() -> MemorySegment.ofArray(new long[BOUNCE_SIZE / 8]));

    /**
     * A small device read (a doorbell record, a WQE basic block) without taking the read lock:
     * the common case only, every page a frame mapped with the read right and no mapped frame
     * ever freed; anything else returns false and the caller takes the locked way, which also
     * names the fault. The bytes are copied into a per-thread bounce buffer under an optimistic
     * stamp and reach {@code dst} only once the stamp validates, i.e. once no map or unmap ran
     * during the copy: the read then happened entirely while the translation held, as if under
     * the lock, and a read that overlapped an unmap leaves {@code dst} untouched (all or nothing,
     * as {@link #transfer}). Physical memory is one segment that outlives every frame, so a
     * stale translation read meanwhile copies someone's bytes into the bounce buffer, never past
     * it, and they are discarded. Why: a doorbell's fetch is two such reads, and their lock's
     * two CASes per read were a tenth of a small RDMA WRITE's cost.
     */
    private boolean readOptimistic(long iova, MemorySegment dst, long dstOffset, int len) {
        long stamp = lock.tryOptimisticRead();
        if (stamp == 0 || phys.freedWhileDmaMapped() != 0) {
            return false;
        }
        long p = (iova - IOVA_BASE) >> PAGE_SHIFT;
        long q = (iova + len - 1 - IOVA_BASE) >> PAGE_SHIFT;
        if (p < 0 || q >= IOVA_PAGES) {
            return false;
        }
        long want = VALID | DEV_READ;
        long mask = want | RESOURCE;
        long e = entry(p);
        long e2 = q == p ? e : entry(q);
        if ((e & mask) != want || (e2 & mask) != want) {
            return false;
        }
        MemorySegment bounce = BOUNCE.get();
        long in = iova & (PAGE_SIZE - 1);
        int first = (int) Math.min(len, PAGE_SIZE - in);
        try {
            MemorySegment.copy(memory, (e & -PAGE_SIZE) | in, bounce, 0, first);
            if (first < len) {
                MemorySegment.copy(memory, e2 & -PAGE_SIZE, bounce, first, len - first);
            }
        } catch (IndexOutOfBoundsException staleEntry) {
            return false; // an entry read while it changed: the stamp would not validate either
        }
        if (!lock.validate(stamp)) {
            return false;
        }
        MemorySegment.copy(bounce, 0, dst, dstOffset, len);
        return true;
    }

    /** Device writes {@code len} bytes from {@code src} at iova; all or nothing. */
    @Override
    public void write(long iova, MemorySegment src, long srcOffset, long len) {
        transfer(iova, src, srcOffset, len, true);
        bytesWritten.add(len);
    }

    private void transfer(long iova, MemorySegment buf, long off, long len, boolean toMemory) {
        if (len < 0 || off < 0 || off + len > buf.byteSize()) {
            throw new KernelException(Errno.EINVAL, "device buffer range " + off + "+" + len + " outside " + buf.byteSize() + " bytes");
        }
        if (len == 0) {
            return;
        }
        long stamp = lock.readLock();
        try {
            long[] slots = slots(pages(iova, len));
            int last = translateAll(iova, len, toMemory ? DEV_WRITE : DEV_READ, slots, 0) - 1;
            long base = iova & -PAGE_SIZE;
            long done = 0;
            long bar = 0;
            while (done < len) {
                long cur = iova + done;
                int i = (int) ((cur - base) >>> PAGE_SHIFT);
                MemorySegment seg = segmentAt(slots, i, cur);
                long n = runAt(seg, slots, i, last, cur, len - done);
                n = Math.min(n, len - done);
                if (toMemory) {
                    MemorySegment.copy(buf, off + done, seg, address(slots[i], cur), n);
                } else {
                    MemorySegment.copy(seg, address(slots[i], cur), buf, off + done, n);
                }
                if ((slots[i] & SLOT_RESOURCE) != 0) {
                    bar += n;
                }
                done += n;
            }
            if (bar != 0) {
                barBytes.add(bar); // once per transfer: the counter is shared by every DMA of the domain
            }
        } catch (IllegalStateException barFreed) {
            throw barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /** Device copies {@code len} bytes from one IOVA to another of this domain (loopback DMA). */
    public void copy(long srcIova, long dstIova, long len) {
        copyTo(srcIova, this, dstIova, len);
    }

    /**
     * Peer-to-peer DMA: {@code len} bytes from {@code srcIova} of this domain to {@code dstIova} of
     * {@code dst} (the requester's read and the responder's write of one RDMA transfer between two
     * devices). All or nothing. Both domains' read locks are taken in creation order, so two
     * transfers in opposite directions cannot deadlock against a waiting unmap.
     */
    @Override
    public void copyTo(long srcIova, DmaPort dst, long dstIova, long len) {
        if (!(dst instanceof IommuDomain d) || d.iommu != iommu) {
            throw new IllegalArgumentException("DMA from domain " + name + " to " + dst.name() + ": not a domain of the same IOMMU");
        }
        if (len < 0) {
            throw new KernelException(Errno.EINVAL, "negative DMA copy length " + len);
        }
        if (len == 0) {
            return;
        }
        IommuDomain first = order <= d.order ? this : d;
        IommuDomain second = first == this ? d : this;
        long s1 = first.lock.readLock();
        try {
            long s2 = second == first ? 0 : second.lock.readLock();
            try {
                int sn = pages(srcIova, len);
                long[] slots = slots(sn + pages(dstIova, len));
                translateAll(srcIova, len, DEV_READ, slots, 0);
                int dn = d.translateAll(dstIova, len, DEV_WRITE, slots, sn);
                long sBase = srcIova & -PAGE_SIZE;
                long dBase = dstIova & -PAGE_SIZE;
                long done = 0;
                long srcBar = 0;
                long dstBar = 0;
                while (done < len) {
                    long s = srcIova + done;
                    long t = dstIova + done;
                    int si = (int) ((s - sBase) >>> PAGE_SHIFT);
                    int di = sn + (int) ((t - dBase) >>> PAGE_SHIFT);
                    long want = len - done;
                    MemorySegment from = segmentAt(slots, si, s);
                    MemorySegment to = d.segmentAt(slots, di, t);
                    long n = Math.min(want, Math.min(runAt(from, slots, si, sn - 1, s, want), d.runAt(to, slots, di, sn + dn - 1, t, want)));
                    MemorySegment.copy(from, address(slots[si], s), to, address(slots[di], t), n);
                    if ((slots[si] & SLOT_RESOURCE) != 0) {
                        srcBar += n;
                    }
                    if ((slots[di] & SLOT_RESOURCE) != 0) {
                        dstBar += n;
                    }
                    done += n;
                }
                if (srcBar != 0) {
                    barBytes.add(srcBar);
                }
                if (dstBar != 0) {
                    d.barBytes.add(dstBar);
                }
                bytesRead.add(len);
                d.bytesWritten.add(len);
            } catch (IllegalStateException barFreed) {
                throw barGone(srcIova);
            } finally {
                if (second != first) {
                    second.lock.unlockRead(s2);
                }
            }
        } finally {
            first.lock.unlockRead(s1);
        }
    }

    /** 8-byte atomic fetch-and-add at an 8-byte aligned IOVA (IB atomics). */
    @Override
    public long fetchAdd(long iova, long delta) {
        checkAtomic(iova);
        long stamp = lock.readLock();
        try {
            long slot = translatePage(iova, DEV_READ | DEV_WRITE);
            return (long) LONG_AT.getAndAdd(segment(slot, iova), address(slot, iova), delta);
        } catch (IllegalStateException barFreed) {
            throw barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /** 8-byte atomic compare-and-swap; returns the value found. */
    @Override
    public long compareAndSwap(long iova, long expect, long update) {
        checkAtomic(iova);
        long stamp = lock.readLock();
        try {
            long slot = translatePage(iova, DEV_READ | DEV_WRITE);
            return (long) LONG_AT.compareAndExchange(segment(slot, iova), address(slot, iova), expect, update);
        } catch (IllegalStateException barFreed) {
            throw barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /** 8-byte store with release order at an 8-byte aligned IOVA (ATOMIC WRITE): the write right suffices. */
    @Override
    public void atomicWrite(long iova, long value) {
        checkAtomic(iova);
        long stamp = lock.readLock();
        try {
            long slot = translatePage(iova, DEV_WRITE);
            LONG_AT.setRelease(segment(slot, iova), address(slot, iova), value);
        } catch (IllegalStateException barFreed) {
            throw barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /**
     * Copies all but the last word under the read lock and one translation, then stores the last
     * word with release semantics: a poller that acquires the owner bit sees every earlier byte.
     * A descriptor never crosses a page (CQEs and EQEs are 64-byte aligned in their rings), so
     * one page is translated; all or nothing as {@link #transfer}.
     */
    /** Bytes below which {@link #writeDescriptor} moves word by word. */
    private static final int SMALL_DESCRIPTOR = 128;

    @Override
    public void writeDescriptor(long iova, MemorySegment src, long srcOffset, int len) {
        if ((iova & 7) != 0 || (len & 7) != 0 || len < 8 || (iova & (PAGE_SIZE - 1)) + len > PAGE_SIZE) {
            throw new KernelException(Errno.EINVAL, String.format("descriptor write of %d bytes at iova 0x%x: needs 8-byte alignment, "
                    + "whole words and one page", len, iova));
        }
        if (srcOffset < 0 || srcOffset + len > src.byteSize()) {
            throw new KernelException(Errno.EINVAL, "device buffer range " + srcOffset + "+" + len + " outside " + src.byteSize() + " bytes");
        }
        long stamp = lock.readLock();
        try {
            long slot = translatePage(iova, DEV_WRITE);
            MemorySegment seg = segment(slot, iova);
            long at = address(slot, iova);
            int body = len - 8;
            if (body <= SMALL_DESCRIPTOR) {
                // word by word: a bulk copy's set-up cost more than the copy for a CQE's 56 bytes
                for (int i = 0; i < body; i += 8) {
                    seg.set(ValueLayout.JAVA_LONG_UNALIGNED, at + i, src.get(ValueLayout.JAVA_LONG_UNALIGNED, srcOffset + i));
                }
            } else {
                MemorySegment.copy(src, srcOffset, seg, at, body);
            }
            LONG_AT.setRelease(seg, at + body, src.get(ValueLayout.JAVA_LONG_UNALIGNED, srcOffset + body));
            if ((slot & SLOT_RESOURCE) != 0) {
                barBytes.add(len);
            }
        } catch (IllegalStateException barFreed) {
            throw barGone(iova);
        } finally {
            lock.unlockRead(stamp);
        }
        bytesWritten.add(len);
    }

    /**
     * The flushing read of an RDMA FLUSH: each page translated with the read right (a fault names
     * the first page refused), each run of consecutive pages of one aperture BAR handed to its
     * device as one flush, then a full fence (this port's earlier stores are visible). Runs are
     * flushed as the walk finds them: flushing more than the range is harmless, so a fault after
     * a run was flushed loses nothing. Holds the read lock throughout, as a transfer does: an
     * unmap waits for it.
     */
    @Override
    public void flush(long iova, long len) {
        if (len < 0) {
            throw new KernelException(Errno.EINVAL, "negative flush length " + len);
        }
        if (len > 0) {
            long stamp = lock.readLock();
            try {
                int n = pages(iova, len);
                long base = iova & -PAGE_SIZE;
                Resource run = null;
                long runIova = 0;
                long runFrom = 0;
                long runTo = 0;
                for (int i = 0; i < n; i++) {
                    long va = base + ((long) i << PAGE_SHIFT);
                    long slot = translatePage(va, DEV_READ);
                    Resource r = (slot & SLOT_APERTURE) == 0 ? null : resourceOf(va);
                    long off = slot & -PAGE_SIZE;
                    if (run != null && (r != run || off != runTo)) {
                        flushRun(run, runFrom, runTo, runIova);
                        run = null;
                    }
                    if (r != null) {
                        if (run == null) {
                            run = r;
                            runIova = va;
                            runFrom = off;
                        }
                        runTo = off + PAGE_SIZE;
                    }
                }
                if (run != null) {
                    flushRun(run, runFrom, runTo, runIova);
                }
            } finally {
                lock.unlockRead(stamp);
            }
        }
        VarHandle.fullFence();
    }

    private Resource resourceOf(long iova) {
        long p = (iova - IOVA_BASE) >> PAGE_SHIFT;
        return resources[(int) (p >>> 9)][(int) (p & 511)];
    }

    private void flushRun(Resource r, long from, long to, long at) {
        if (!r.aperture().flush(from, to - from)) {
            throw new KernelException(Errno.EIO, String.format("%s: flush of BAR %d 0x%x+0x%x of %s completed with an error (the run at iova 0x%x)",
                    name, r.bar(), from, to - from, r.fn().bdf(), at));
        }
    }

    /** Every page mapped, and a page of a persistent aperture BAR. */
    @Override
    public boolean persistent(long iova, long len) {
        if (len <= 0) {
            return false;
        }
        long stamp = lock.readLock();
        try {
            long first = ((iova & -PAGE_SIZE) - IOVA_BASE) >> PAGE_SHIFT;
            int n = pages(iova, len);
            if (first < 0 || first + n > IOVA_PAGES) {
                return false;
            }
            for (int i = 0; i < n; i++) {
                long p = first + i;
                long e = entry(p);
                if ((e & (VALID | RESOURCE)) != (VALID | RESOURCE)) {
                    return false;
                }
                BarAperture a = resources[(int) (p >>> 9)][(int) (p & 511)].aperture();
                if (a == null || !a.persistent()) {
                    return false;
                }
            }
            return true;
        } finally {
            lock.unlockRead(stamp);
        }
    }

    private void checkAtomic(long iova) {
        if ((iova & 7) != 0) {
            throw new KernelException(Errno.EINVAL, String.format("atomic at iova 0x%x is not 8-byte aligned", iova));
        }
    }

    /**
     * Removes every mapping and IOVA range; returns how many IOVA pages were still allocated (a
     * leak of the driver: pages mapped, and pages of ranges never freed).
     */
    long destroy() {
        long stamp = lock.writeLock();
        try {
            destroyed = true;
            long leaked = usedPages;
            for (int l = 0; l < supers.length; l++) {
                if (supers[l] != 0) {
                    phys.dmaRef(supers[l] >>> PAGE_SHIFT, -1);
                    supers[l] = 0;
                }
            }
            superpages = 0;
            for (int page = used.nextSetBit(0); page >= 0; page = used.nextSetBit(page + 1)) {
                if (entry(page) != 0) {
                    release(page);
                }
            }
            used.clear();
            iovaRanges.clear();
            usedPages = 0;
            mapped = 0;
            return leaked;
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    public long faultCount() {
        return faults.get();
    }

    public long useAfterFreeCount() {
        return useAfterFree.get();
    }

    public long bytesRead() {
        return bytesRead.sum();
    }

    public long bytesWritten() {
        return bytesWritten.sum();
    }

    /** Bytes this device read from or wrote to another PCI function's BAR (peer-to-peer DMA). */
    public long barBytes() {
        return barBytes.sum();
    }
}
