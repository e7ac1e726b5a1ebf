package org.peerdirect.kernel.iommu;

import static org.peerdirect.kernel.iommu.IoPageTable.DEV_WRITE;
import static org.peerdirect.kernel.iommu.IoPageTable.RESOURCE;
import static org.peerdirect.kernel.iommu.IoPageTable.SUPER;
import static org.peerdirect.kernel.iommu.IoPageTable.SUPER_PAGES;
import static org.peerdirect.kernel.iommu.IoPageTable.VALID;
import static org.peerdirect.kernel.iommu.IommuDomain.IOVA_BASE;
import static org.peerdirect.kernel.iommu.IommuDomain.IOVA_PAGES;
import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.StampedLock;

import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/**
 * The IOMMU's page walk for one domain (what the hardware does on an IOTLB miss, and
 * {@code iommu_iova_to_phys}): an I/O virtual address and the rights an access needs → where the
 * bytes are (physical memory, a BAR, the page an aperture BAR maps now), or a fault recorded in
 * the {@link DomainAudit}. A transfer translates every page of its range once, into a per-thread
 * array of runs ({@link DmaRuns}: segment, offset, length, contiguous pages merged) before any
 * byte moves (all or nothing); {@link DmaEngine} then copies run by run without looking at the
 * table again.
 *
 * <p>Locks: every method needs the domain's read lock (or the write lock), held from the first
 * translation to the last byte moved, so a translation cannot go stale while it is used: an unmap
 * waits for it. {@code StampedLock} has no owner, so this cannot be asserted per thread.
 */
final class DmaTranslation {

    /** Bit 0 of a translated page slot: the page is a BAR page of a resource mapping, not a frame. */
    static final long SLOT_RESOURCE = 1;
    /**
     * Bit 1 with bit 0: the BAR is an aperture, its page is resolved again when bytes move (the
     * slot holds the page's offset in the BAR; the bytes are at the in-page offset of the page
     * the device maps there).
     */
    static final long SLOT_APERTURE = 2;

    private final IoPageTable table;
    private final DomainAudit audit;
    private final PhysicalMemory phys;
    private final MemorySegment memory;
    private final StampedLock lock;

    DmaTranslation(IoPageTable table, DomainAudit audit, PhysicalMemory phys, StampedLock lock) {
        this.table = table;
        this.audit = audit;
        this.phys = phys;
        this.memory = phys.memory();
        this.lock = lock;
    }

    /** Pages touched by [iova, iova+len), len > 0. */
    static int pages(long iova, long len) {
        return (int) (((iova & (PAGE_SIZE - 1)) + len + PAGE_SIZE - 1) >>> PAGE_SHIFT);
    }

    /**
     * Translates [iova, iova+len) once, for an access needing {@code need} (DEV_READ and/or
     * DEV_WRITE), into {@code runs} (reset first): every page checked, the first refused one
     * throws (recorded in the audit) before any byte moved, so the transfer is all or nothing.
     * Read lock, held until the last byte has moved through the runs. Faults name the refused
     * page's first byte.
     *
     * <p>The common page (a frame mapped with the rights needed, while no mapped frame was ever
     * freed, {@link PhysicalMemory#freedWhileDmaMapped}) is one table read inline; everything else
     * goes the full way ({@link #translateSlow}), which also checks the frame's generation once a
     * mapped frame was freed (before that, every mapped frame is still the one mapped: it cannot be
     * freed without being counted there).
     */
    void translate(long iova, long len, long need, DmaRuns runs) {
        assert lock.isReadLocked() || lock.isWriteLocked();
        runs.reset();
        if (len > (long) IOVA_PAGES << PAGE_SHIFT) { // more pages than the space holds (and than an int counts)
            throw audit.fault(IommuFault.Kind.NOT_MAPPED, iova, "a transfer of " + len + " bytes is larger than the IOVA space");
        }
        int n = pages(iova, len);
        long base = iova & -PAGE_SIZE;
        long first = (base - IOVA_BASE) >> PAGE_SHIFT;
        boolean checkGeneration = phys.freedWhileDmaMapped() != 0;
        boolean inline = !checkGeneration && first >= 0 && first + n <= IOVA_PAGES;
        long want = VALID | need;
        long mask = want | RESOURCE;
        long from = iova & (PAGE_SIZE - 1);
        long left = len;
        for (int i = 0; i < n; i++) {
            long bytes = Math.min(left, PAGE_SIZE - from);
            long e = inline ? table.entry(first + i) : 0;
            if (inline && (e & mask) == want) {
                runs.add(memory, (e & -PAGE_SIZE) | from, bytes, false);
            } else {
                translateSlow(base + ((long) i << PAGE_SHIFT), need, checkGeneration, from, bytes, runs);
            }
            left -= bytes;
            from = 0;
        }
    }

    /**
     * One page of {@link #translate} the full way: checked (mapping, rights, the frame's
     * generation when {@code checkGeneration}, the BAR's function, the aperture page), then
     * {@code bytes} from in-page offset {@code from} appended to {@code runs}. An aperture page's
     * memory may cover the following BAR pages of the same mapping (a GPU's 64 KiB page): those
     * are mapped and unmapped with it ({@code BarAperture}'s contract), so the one resolution
     * serves them all ({@code runs.covered}) and the device is asked once, not per 4 KiB page.
     */
    private void translateSlow(long va, long need, boolean checkGeneration, long from, long bytes, DmaRuns runs) {
        long p = (va - IOVA_BASE) >> PAGE_SHIFT;
        long e = checkedEntry(va, p, need);
        long at = e & -PAGE_SIZE;
        if ((e & RESOURCE) == 0) {
            if (checkGeneration) {
                checkFrame(va, p, e);
            }
            runs.add(memory, at | from, bytes, false);
            return;
        }
        BarResource r = table.resource(p);
        if (runs.covered == r && at >= runs.coverFrom && at < runs.coverTo) {
            runs.add(runs.coverSeg, at - runs.coverFrom + from, bytes, true);
            return;
        }
        MemorySegment page = resolve(va, e, r);
        if (page == null) {
            runs.add(r.memory(), at | from, bytes, true);
            return;
        }
        runs.covered = r;
        runs.coverFrom = at;
        runs.coverTo = at + page.byteSize();
        runs.coverSeg = page;
        runs.add(page, from, bytes, true);
    }

    /** The entry of page {@code p} (holding {@code va}) if it is mapped with the rights {@code need}; else a fault. */
    private long checkedEntry(long va, long p, long need) {
        long e = p < 0 || p >= IOVA_PAGES ? 0 : table.entry(p);
        if ((e & VALID) == 0) {
            throw audit.fault(IommuFault.Kind.NOT_MAPPED, va, "no mapping");
        }
        if ((e & need) != need) {
            throw audit.fault(IommuFault.Kind.PERMISSION, va, "mapping does not allow the device to "
                    + ((need & ~e & DEV_WRITE) != 0 ? "write" : "read"));
        }
        return e;
    }

    /**
     * A use-after-free fault unless frame entry {@code e} of page {@code p} still maps the frame it
     * was made for: the frame was allocated when mapped and every free advances its generation, so
     * an equal generation means not freed since (one read, no kind check); a 2 MiB entry keeps its
     * head's, and the huge page is freed whole.
     */
    private void checkFrame(long va, long p, long e) {
        long pfn = e >>> PAGE_SHIFT;
        boolean superpage = (e & SUPER) != 0;
        if (phys.generation(superpage ? pfn & -SUPER_PAGES : pfn) != table.generation(p, superpage)) {
            throw audit.fault(IommuFault.Kind.USE_AFTER_FREE, va, "frame " + pfn + " was freed after it was mapped");
        }
    }

    /**
     * Checks BAR entry {@code e} (resource {@code r}): a use-after-free when the function was
     * removed, or when the aperture page is no longer mapped by its device. Returns the memory
     * the device maps at an aperture page now (starting at that page), null for a memory BAR.
     */
    private MemorySegment resolve(long va, long e, BarResource r) {
        if (!r.fn().present()) {
            throw audit.fault(IommuFault.Kind.USE_AFTER_FREE, va, "BAR " + r.bar() + " of " + r.fn().bdf() + " was removed after it was mapped");
        }
        if (r.aperture() == null) {
            return null;
        }
        MemorySegment page = r.aperture().page(e & -PAGE_SIZE);
        if (page == null || !page.scope().isAlive()) {
            throw audit.fault(IommuFault.Kind.USE_AFTER_FREE, va, String.format(
                    "BAR %d page 0x%x of %s is no longer mapped by its device (its memory was taken back under this mapping)",
                    r.bar(), e & -PAGE_SIZE, r.fn().bdf()));
        }
        return page;
    }

    /**
     * Translates the one page holding {@code iova} for an access needing {@code need} (an atomic,
     * a descriptor, a flushing read): its page-aligned address in physical memory, or its offset
     * in its BAR with {@link #SLOT_RESOURCE} (and {@link #SLOT_APERTURE}) set; {@link #segment}
     * and {@link #address} locate the bytes. Faults name {@code iova}. Read lock.
     */
    long translatePage(long iova, long need) {
        assert lock.isReadLocked() || lock.isWriteLocked();
        long p = (iova - IOVA_BASE) >> PAGE_SHIFT;
        long e = checkedEntry(iova, p, need);
        if ((e & RESOURCE) == 0) {
            if (phys.freedWhileDmaMapped() != 0) {
                checkFrame(iova, p, e);
            }
            return e & -PAGE_SIZE;
        }
        return (e & -PAGE_SIZE) | SLOT_RESOURCE | (resolve(iova, e, table.resource(p)) != null ? SLOT_APERTURE : 0);
    }

    /**
     * The segment a translated slot lies in (physical memory, a BAR, or the page an aperture BAR
     * maps now); read lock. An aperture page unmapped since the translation throws
     * {@link IllegalStateException}, reported as a use-after-free like a BAR freed under the DMA.
     */
    MemorySegment segment(long slot, long iova) {
        if ((slot & SLOT_RESOURCE) == 0) {
            return memory;
        }
        BarResource r = table.resource((iova - IOVA_BASE) >> PAGE_SHIFT);
        if ((slot & SLOT_APERTURE) == 0) {
            return r.memory();
        }
        MemorySegment page = r.aperture().page(slot & -PAGE_SIZE);
        if (page == null) {
            throw new IllegalStateException("aperture page unmapped during the DMA");
        }
        return page;
    }

    /** The offset of {@code iova}'s byte in the segment of its slot. */
    static long address(long slot, long iova) {
        return ((slot & SLOT_APERTURE) != 0 ? 0 : slot & -PAGE_SIZE) | (iova & (PAGE_SIZE - 1));
    }
}
