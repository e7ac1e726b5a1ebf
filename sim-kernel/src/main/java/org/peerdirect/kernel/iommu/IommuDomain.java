package org.peerdirect.kernel.iommu;

import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.StampedLock;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaResource;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;
import org.peerdirect.kernel.pci.BarAperture;
import org.peerdirect.kernel.pci.PciBarResource;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One device's IOMMU domain ({@code struct iommu_domain} with the DMA API over it,
 * {@code drivers/iommu/dma-iommu.c}). Two faces: the driver's mapping calls ({@link DmaMapper}:
 * {@code dma_map_sg}, {@code dma_unmap}, {@link #dmaMapResource}, the IOVA ranges), implemented
 * here over the {@link IovaDomain} allocator and the {@link IoPageTable}; and the device's
 * accesses ({@link DmaPort}), implemented by the {@link DmaEngine} through the page walk and
 * recorded in the {@link DomainAudit}. A device model is handed only the latter. IOVAs start at
 * {@link #IOVA_BASE}; the space holds {@link #IOVA_PAGES} pages.
 *
 * <p>Invariant (the promise the system proves): once {@link #dmaUnmap} returns, no DMA through
 * that mapping is in flight or will ever happen. One {@link StampedLock} per domain guards the
 * page table and the allocator: map and unmap hold it in write mode, DMA accesses in read mode
 * from their first translation to their last byte ({@link DmaEngine} says how). Each mapping
 * remembers the frame's generation: a frame freed and reused since is caught as use-after-free
 * instead of being read or written.
 */
public final class IommuDomain implements DmaMapper, DmaPort {

    public static final long IOVA_BASE = 0x100000000L;
    /** 2^24 pages: 64 GiB of I/O virtual space per domain. */
    public static final int IOVA_PAGES = 1 << 24;
    /** The largest range {@link #dmaIovaTryAlloc} reserves: 256 MiB. */
    public static final int IOVA_RANGE_MAX_PAGES = 1 << 16;

    private static final AtomicLong ORDER = new AtomicLong();

    final Iommu iommu;
    private final String name;
    private final PhysicalMemory phys;
    /** Guards {@link #table} and {@link #iova}: write mode to change them, read mode for DMA. */
    final StampedLock lock = new StampedLock();
    /** Lock order among domains for {@link #copyTo}. */
    final long order = ORDER.incrementAndGet();
    private final IoPageTable table;
    private final IovaDomain iova;
    private final DomainAudit audit;
    final DmaEngine engine;
    private volatile boolean destroyed;

    IommuDomain(Iommu iommu, String name, PhysicalMemory phys) {
        this.iommu = iommu;
        this.name = name;
        this.phys = phys;
        this.table = new IoPageTable(lock, phys, IOVA_PAGES);
        this.iova = new IovaDomain(lock, IOVA_PAGES);
        this.audit = new DomainAudit(iommu, name);
        this.engine = new DmaEngine(this, lock, table, audit, phys);
    }

    @Override
    public String name() {
        return name;
    }

    // ------------------------------------------------------------------ the driver's side (DmaMapper)

    /**
     * {@code dma_map_resource} / {@code pci_p2pdma_map}: maps [offset, offset+length) of a BAR of
     * another function ({@link PciFunction#resource}: a GPU's BAR1, an SSD's memory window) into
     * this domain, so this device's DMA reaches that device's memory peer to peer.
     * Audited like frames: a DMA after {@link #dmaUnmap} is a fault; a DMA after the function was
     * removed, or to an aperture page its device has unmapped since, is a use-after-free. Offset
     * and length are page-aligned.
     *
     * @throws KernelException EINVAL for a bad range or BAR or a resource that is not a PCI BAR,
     *                         ENODEV when the function is gone,
     *                         ENOMEM when the IOVA space is full
     */
    @Override
    public long dmaMapResource(DmaResource resource, long offset, long length, DmaDirection dir) {
        if (!(resource instanceof PciBarResource pciBar)) {
            throw new KernelException(Errno.EINVAL, "dma_map_resource: " + resource + " is not a PCI BAR (take it from PciFunction.resource)");
        }
        PciFunction fn = pciBar.function();
        int bar = pciBar.bar();
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
        BarResource r = new BarResource(fn, bar, barMemory, aperture);
        long stamp = lock.writeLock();
        try {
            checkAlive();
            int first = reserve(n);
            table.fillResource(first, n, offset, r, dir);
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
            table.fill(first, pfns, gen, pfns.length, dir);
            return IOVA_BASE + ((long) first << PAGE_SHIFT);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    /**
     * The generations of frames {@code pfns[0..n)}, each checked to be allocated; caller holds
     * the write lock. The generation is read before the free check: a frame freed after the check
     * has a newer generation than the one recorded, so the page walk sees the free without
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
     * {@code dma_iova_try_alloc}: reserves {@code size} bytes (rounded up to pages) of contiguous
     * I/O virtual space with nothing mapped in it. Returns -1 where the kernel returns false and
     * the caller maps page by page: here for a range above {@link #IOVA_RANGE_MAX_PAGES} pages or
     * one that would leave less than half of the space free, or on a destroyed domain (this space
     * is 64 GiB, not the 48 bits of a real IOMMU, and long-lived reservations must not starve
     * {@code dma_map_sg}).
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
            if (destroyed || iova.usedPages() + n > IOVA_PAGES / 2) { // a destroyed domain: the caller's first map names it
                return -1;
            }
            int first = iova.allocIova(n);
            if (first < 0) {
                return -1;
            }
            table.ensureLeaves(first, n);
            iova.addRange(first, n);
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
            table.fill(first, pfns, generations(pfns, n, "dma_iova_link"), n, dir);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    /**
     * EINVAL naming the first of pages first..first+n that lies outside the IOVA range holding the
     * first one or is not linked ({@code linked}) / already linked (otherwise); caller holds the
     * write lock. A link or unlink stays in one range: pages past its end are outside.
     */
    private void checkRangePages(String fn, long iova, int first, int n, boolean linked) {
        assert lock.isWriteLocked();
        int end = first + n;
        int outside = Math.min(end, this.iova.rangeEnd(first));
        int wrong = table.firstMismatch(first, end, linked);
        if (outside < end || wrong >= 0) {
            int at = outside < end && (wrong < 0 || outside < wrong) ? outside : wrong;
            throw new KernelException(Errno.EINVAL, String.format("%s at iova 0x%x of domain %s: page %d of %d is %s", fn, iova, name, at - first, n,
                    at == outside ? "not in a range of dma_iova_try_alloc" : linked ? "not linked (double unlink?)" : "already linked"));
        }
    }

    @Override
    public void dmaIovaUnlink(long iova, int npages) {
        long stamp = lock.writeLock();
        try {
            int first = page(iova, npages);
            checkRangePages("dma_iova_unlink", iova, first, npages, true);
            table.clear(first, npages);
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
            Integer had = this.iova.range(first);
            if (had == null || had != n) {
                throw new KernelException(Errno.EINVAL, String.format("dma_iova_free of iova 0x%x + %d bytes in domain %s: not a range of dma_iova_try_alloc%s",
                        iova, size, name, had == null ? "" : " (that range has " + had + " pages)"));
            }
            int linkedPage = table.firstEntry(first, first + n);
            if (linkedPage >= 0) {
                throw new KernelException(Errno.EBUSY, String.format("dma_iova_free of iova 0x%x in domain %s: page %d of %d is still linked",
                        iova, name, linkedPage - first, n));
            }
            this.iova.removeRange(first);
            this.iova.freeIova(first, n);
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    private void checkAlive() {
        if (destroyed) {
            throw new KernelException(Errno.EINVAL, "IOMMU domain " + name + " is destroyed");
        }
    }

    /**
     * Allocates {@code n} consecutive IOVA pages with their table leaves; the caller fills their
     * entries before it releases the write lock. ENOMEM when no range is free.
     */
    private int reserve(int n) {
        assert lock.isWriteLocked();
        int first = iova.allocIova(n);
        if (first < 0) {
            throw new KernelException(Errno.ENOMEM, "IOVA space of domain " + name + " is full (" + iova.usedPages() + " pages allocated, "
                    + table.mapped() + " mapped)");
        }
        table.ensureLeaves(first, n);
        return first;
    }

    /**
     * {@code dma_unmap_page} / {@code dma_unmap_sg} of {@code npages} from {@code iova}; waits
     * for DMA in flight in this domain (the write lock waits for every reader), so none happens
     * through it after the return.
     */
    @Override
    public void dmaUnmap(long iova, int npages) {
        long stamp = lock.writeLock();
        try {
            int first = page(iova, npages);
            int inRange = this.iova.firstRangePage(first, first + npages);
            for (int i = 0; i < npages; i++) {
                if (!this.iova.allocated(first + i)) {
                    throw new KernelException(Errno.EINVAL, String.format(
                            "dma_unmap of iova 0x%x in domain %s: page %d of %d is not mapped (double unmap?)", iova, name, i, npages));
                }
                if (first + i == inRange) {
                    throw new KernelException(Errno.EINVAL, String.format(
                            "dma_unmap of iova 0x%x in domain %s: page %d of %d lies in a range of dma_iova_try_alloc (dma_iova_unlink it)",
                            iova, name, i, npages));
                }
            }
            table.clear(first, npages);
            this.iova.freeIova(first, npages);
        } finally {
            lock.unlockWrite(stamp);
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
            return table.mapped();
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /** 2 MiB entries in this domain now (each also counts 512 pages in {@link #mappedPages}). */
    public long mappedSuperpages() {
        long stamp = lock.readLock();
        try {
            return table.superpages();
        } finally {
            lock.unlockRead(stamp);
        }
    }

    /** Every page mapped, and a page of a persistent aperture BAR. */
    @Override
    public boolean persistent(long iova, long len) {
        return engine.persistent(iova, len);
    }

    /**
     * Removes every mapping and IOVA range; returns how many IOVA pages were still allocated (a
     * leak of the driver: pages mapped, and pages of ranges never freed).
     */
    long destroy() {
        long stamp = lock.writeLock();
        try {
            destroyed = true;
            long leaked = iova.usedPages();
            table.clearAll();
            iova.clear();
            return leaked;
        } finally {
            lock.unlockWrite(stamp);
        }
    }

    // ------------------------------------------------------------------ the device's side (DmaPort)

    /**
     * Device reads {@code len} bytes at iova into {@code dst}. All pages are checked before any
     * byte moves, so a faulting DMA moves nothing.
     */
    @Override
    public void read(long iova, MemorySegment dst, long dstOffset, long len) {
        engine.read(iova, dst, dstOffset, len);
    }

    /** Device writes {@code len} bytes from {@code src} at iova; all or nothing. */
    @Override
    public void write(long iova, MemorySegment src, long srcOffset, long len) {
        engine.write(iova, src, srcOffset, len);
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
        engine.copyTo(srcIova, d, dstIova, len);
    }

    /** 8-byte atomic fetch-and-add at an 8-byte aligned IOVA (IB atomics). */
    @Override
    public long fetchAdd(long iova, long delta) {
        return engine.fetchAdd(iova, delta);
    }

    /** 8-byte atomic compare-and-swap; returns the value found. */
    @Override
    public long compareAndSwap(long iova, long expect, long update) {
        return engine.compareAndSwap(iova, expect, update);
    }

    /** 8-byte store with release order at an 8-byte aligned IOVA (ATOMIC WRITE): the write right suffices. */
    @Override
    public void atomicWrite(long iova, long value) {
        engine.atomicWrite(iova, value);
    }

    @Override
    public void writeDescriptor(long iova, MemorySegment src, long srcOffset, int len) {
        engine.writeDescriptor(iova, src, srcOffset, len);
    }

    @Override
    public void flush(long iova, long len) {
        engine.flush(iova, len);
    }

    // ------------------------------------------------------------------ the audit

    public long faultCount() {
        return audit.faults();
    }

    public long useAfterFreeCount() {
        return audit.useAfterFree();
    }

    public long bytesRead() {
        return audit.bytesRead.sum();
    }

    public long bytesWritten() {
        return audit.bytesWritten.sum();
    }

    /** Bytes this device read from or wrote to another PCI function's BAR (peer-to-peer DMA). */
    public long barBytes() {
        return audit.barBytes.sum();
    }
}
