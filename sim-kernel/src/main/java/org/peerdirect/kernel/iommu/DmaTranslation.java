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
import java.util.Arrays;
import java.util.concurrent.locks.StampedLock;

import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/**
 * The IOMMU's page walk for one domain (what the hardware does on an IOTLB miss, and
 * {@code iommu_iova_to_phys}): an I/O virtual address and the rights an access needs → where the
 * bytes are (physical memory, a BAR, the page an aperture BAR maps now), or a fault recorded in
 * the {@link DomainAudit}. A transfer translates every page of its range once, into a per-thread
 * slot array, before any byte moves (all or nothing); {@link DmaEngine} then copies run by run.
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

    /** Per-thread translated pages of the transfer in progress: the data path allocates nothing. */
    private static final ThreadLocal<long[]> SLOTS = ThreadLocal.withInitial(() -> new long[64]);
    /**
     * Beside {@link #SLOTS}: for an aperture slot whose page translateAll resolved, the memory the
     * device returned for it (null otherwise), so the copy does not ask the device again. Valid for
     * one transfer under the read lock.
     */
    private static final ThreadLocal<MemorySegment[]> SEGS = ThreadLocal.withInitial(() -> new MemorySegment[64]);

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

    private static MemorySegment[] segs(int n) {
        MemorySegment[] s = SEGS.get();
        if (s.length < n) {
            s = Arrays.copyOf(s, Integer.highestOneBit(n) << 1); // keeps what a peer copy's source side resolved
            SEGS.set(s);
        }
        return s;
    }

    static long[] slots(int n) {
        long[] s = SLOTS.get();
        if (s.length < n) {
            s = new long[Integer.highestOneBit(n) << 1];
            SLOTS.set(s);
        }
        return s;
    }

    /** Pages touched by [iova, iova+len), len > 0. */
    static int pages(long iova, long len) {
        return (int) (((iova & (PAGE_SIZE - 1)) + len + PAGE_SIZE - 1) >>> PAGE_SHIFT);
    }

    /**
     * Translates the page holding {@code iova} for an access needing {@code need} (DEV_READ and/or
     * DEV_WRITE): its page-aligned address in physical memory, or in its BAR with
     * {@link #SLOT_RESOURCE} set. Faults name {@code iova}. Read lock.
     */
    long translatePage(long iova, long need) {
        assert lock.isReadLocked() || lock.isWriteLocked();
        return translatePage(iova, need, phys.freedWhileDmaMapped() != 0, null, 0);
    }

    /**
     * {@link #translatePage(long, long)} with the frame-generation check only when
     * {@code checkGeneration} (a transfer reads once whether any mapped frame was ever freed,
     * {@link PhysicalMemory#freedWhileDmaMapped}; while none was, every mapped frame is still the
     * one mapped, and the per-page check is skipped), keeping in {@code resolved[at]} when
     * {@code resolved} is not null the memory an aperture page was checked against (null for any
     * other page): the device is asked once per page, not once to check and again to copy.
     */
    private long translatePage(long iova, long need, boolean checkGeneration, MemorySegment[] resolved, int at) {
        long p = (iova - IOVA_BASE) >> PAGE_SHIFT;
        long e = p < 0 || p >= IOVA_PAGES ? 0 : table.entry(p);
        if ((e & VALID) == 0) {
            throw audit.fault(IommuFault.Kind.NOT_MAPPED, iova, "no mapping");
        }
        if ((e & need) != need) {
            throw audit.fault(IommuFault.Kind.PERMISSION, iova, "mapping does not allow the device to "
                    + ((need & ~e & DEV_WRITE) != 0 ? "write" : "read"));
        }
        if ((e & RESOURCE) != 0) {
            return translateResource(iova, p, e, resolved, at);
        }
        long pfn = e >>> PAGE_SHIFT;
        // the frame was allocated when mapped and every free advances its generation: an equal
        // generation means not freed since (one read, no kind check); a 2 MiB entry keeps its
        // head's, and the huge page is freed whole
        boolean superpage = (e & SUPER) != 0;
        if (checkGeneration && phys.generation(superpage ? pfn & -SUPER_PAGES : pfn) != table.generation(p, superpage)) {
            throw audit.fault(IommuFault.Kind.USE_AFTER_FREE, iova, "frame " + pfn + " was freed after it was mapped");
        }
        return pfn << PAGE_SHIFT;
    }

    /** The slot of BAR entry {@code e} of page {@code p}; a use-after-free when its function or aperture page is gone. */
    private long translateResource(long iova, long p, long e, MemorySegment[] resolved, int at) {
        BarResource r = table.resource(p);
        if (!r.fn().present()) {
            throw audit.fault(IommuFault.Kind.USE_AFTER_FREE, iova, "BAR " + r.bar() + " of " + r.fn().bdf() + " was removed after it was mapped");
        }
        if (r.aperture() == null) {
            return (e & -PAGE_SIZE) | SLOT_RESOURCE;
        }
        MemorySegment page = r.aperture().page(e & -PAGE_SIZE);
        if (page == null || !page.scope().isAlive()) {
            throw audit.fault(IommuFault.Kind.USE_AFTER_FREE, iova, String.format(
                    "BAR %d page 0x%x of %s is no longer mapped by its device (its memory was taken back under this mapping)",
                    r.bar(), e & -PAGE_SIZE, r.fn().bdf()));
        }
        if (resolved != null) {
            resolved[at] = page;
        }
        return (e & -PAGE_SIZE) | SLOT_RESOURCE | SLOT_APERTURE;
    }

    /**
     * Checks and translates every page of [iova, iova+len) into {@code slots[at..]}; the first
     * refused page throws, before any byte moved. Read lock. Returns the page count.
     * (Over 80 lines with its comments: the common case is inline on purpose, it is every DMA's loop.)
     */
    int translateAll(long iova, long len, long need, long[] slots, int at) {
        assert lock.isReadLocked() || lock.isWriteLocked();
        int n = pages(iova, len);
        long base = iova & -PAGE_SIZE;
        boolean checkGeneration = phys.freedWhileDmaMapped() != 0;
        long first = (base - IOVA_BASE) >> PAGE_SHIFT;
        if (checkGeneration || first < 0 || first + n > IOVA_PAGES) {
            MemorySegment[] segs = segs(at + n);
            Arrays.fill(segs, at, at + n, null);
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
        BarResource covered = null;
        long coverFrom = 0;
        long coverTo = 0;
        MemorySegment[] segs = null; // made on the first aperture page: a transfer without one pays nothing
        for (int i = 0; i < n; i++) {
            long p = first + i;
            long e = table.entry(p);
            if ((e & mask) == want) {
                slots[at + i] = e & -PAGE_SIZE;
                continue;
            }
            if (covered != null && (e & mask) == (want | RESOURCE)) {
                long off = e & -PAGE_SIZE;
                if (off >= coverFrom && off < coverTo && table.resource(p) == covered) {
                    slots[at + i] = off | SLOT_RESOURCE | SLOT_APERTURE; // segs[at + i] stays null: resolved again if a copy starts here
                    continue;
                }
            }
            if (segs == null && (e & mask) == (want | RESOURCE)) {
                segs = segs(at + n);
                Arrays.fill(segs, at, at + n, null);
            }
            long slot = translatePage(base + ((long) i << PAGE_SHIFT), need, false, segs, at + i);
            slots[at + i] = slot;
            covered = null;
            if ((slot & SLOT_APERTURE) != 0) {
                MemorySegment page = segs[at + i];
                if (page.byteSize() > PAGE_SIZE) {
                    covered = table.resource(p);
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
    MemorySegment segmentAt(long[] slots, int i, long iova) {
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
    long runAt(MemorySegment seg, long[] slots, int i, int last, long iova, long want) {
        return (slots[i] & SLOT_APERTURE) != 0 ? apertureRun(seg, slots, i, last, iova, want) : run(slots, i, last, iova, want);
    }

    /**
     * Bytes from {@code iova} (in aperture slot {@code i}, whose page the device maps onto
     * {@code seg}) that one copy may move: through the following IOVA pages while translateAll
     * found them covered by the same resolution (consecutive BAR offsets, no resolution of their
     * own), as far as {@code seg} reaches (a device returns memory beyond the page only where it
     * is contiguous behind the following BAR pages, e.g. the rest of a GPU's 64 KiB page). Same
     * thread and transfer as the translateAll, read lock held.
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
