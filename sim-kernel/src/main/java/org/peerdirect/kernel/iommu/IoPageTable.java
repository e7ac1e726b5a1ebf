package org.peerdirect.kernel.iommu;

import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.util.concurrent.locks.StampedLock;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/**
 * One domain's I/O page table ({@code drivers/iommu/io-pgtable-arm.c}): I/O virtual page →
 * frame or BAR page, with the device's rights, in 4 KiB entries grouped in 512-entry leaves, and
 * 2 MiB entries where a whole leaf maps one huge page ({@code iommu_pgsize}'s choice). It holds
 * the DMA reference each entry keeps on its frame ({@link PhysicalMemory#dmaRef}) and the frame's
 * generation at map time, against which the walk ({@link DmaTranslation}) tells a freed frame.
 * It knows nothing of which IOVA pages are allocated ({@link IovaDomain} does).
 *
 * <p>Locks: the domain's {@link StampedLock}. Every method that changes the table needs the
 * caller's write lock and asserts it ({@code StampedLock} has no owner, so the assertion checks
 * the mode: held by somebody, and in this domain only map/unmap paths take it). {@link #entry},
 * {@link #resource} and {@link #generation} are read under the read lock, or under an optimistic
 * stamp the caller validates before it lets what it read take effect.
 *
 * <p>Invariants: a leaf with a 2 MiB entry has no 4 KiB leaf ({@code entries[l] == null}), so
 * {@link #entry} reads one array on the common path; its generation is the head frame's, kept in
 * {@code gens[l][0]}. A 2 MiB entry holds one DMA reference, on the head frame: a huge page is
 * allocated and freed whole (hugetlb pages never split), so the head's count and generation speak
 * for its 512 frames. {@link #mapped} counts pages with an entry, a 2 MiB entry as 512.
 */
final class IoPageTable {

    static final long VALID = 1;
    static final long DEV_READ = 2;
    static final long DEV_WRITE = 4;
    /** The entry maps a page of another PCI function's BAR ({@code dma_map_resource}), not a frame. */
    static final long RESOURCE = 8;
    /** A 2 MiB entry: the whole 512-page leaf maps one huge page ({@link #supers}). */
    static final long SUPER = 16;
    /** IOVA pages per 2 MiB superpage entry: one table leaf. */
    static final int SUPER_PAGES = 512;

    private final StampedLock lock;
    private final PhysicalMemory phys;
    /** Entries (pfn << 12 | flags, or BAR page offset | flags | RESOURCE) and generations, per 512-page leaf. */
    private final long[][] entries;
    private final int[][] gens;
    /** Per leaf, a 2 MiB entry (head pfn << 12 | flags | SUPER) or 0, as an IOMMU's second-level entry with its page-size bit. */
    private final long[] supers;
    /** For RESOURCE entries, the BAR they map (the entry holds the page within it). */
    private final BarResource[][] resources;
    /** Leaves mapped by a 2 MiB entry. */
    private long superpages;
    /** Pages with an entry (what DMA can reach). */
    private long mapped;

    IoPageTable(StampedLock lock, PhysicalMemory phys, int pages) {
        this.lock = lock;
        this.phys = phys;
        int leaves = pages / SUPER_PAGES;
        entries = new long[leaves][];
        gens = new int[leaves][];
        supers = new long[leaves];
        resources = new BarResource[leaves][];
    }

    /** The entry flags of a mapping in direction {@code dir}. */
    static long flags(DmaDirection dir) {
        return VALID | (dir.deviceReads ? DEV_READ : 0) | (dir.deviceWrites ? DEV_WRITE : 0);
    }

    /**
     * The entry of IOVA page {@code p} (0 ≤ p < IOVA_PAGES): 0 where nothing maps it; within a
     * 2 MiB entry, the page's frame with the entry's flags (SUPER among them). Caller holds the
     * lock or an optimistic stamp it validates.
     */
    long entry(long p) {
        int l = (int) (p >>> 9);
        long[] leaf = entries[l];
        if (leaf != null) {
            return leaf[(int) (p & 511)];
        }
        long s = supers[l];
        return s == 0 ? 0 : s + ((p & 511) << PAGE_SHIFT);
    }

    /** The BAR behind RESOURCE entry {@code p}; caller holds the lock. */
    BarResource resource(long p) {
        return resources[(int) (p >>> 9)][(int) (p & 511)];
    }

    /**
     * The generation recorded for page {@code p}'s frame when it was mapped: the head's for a page
     * under a 2 MiB entry ({@code superpage}). Caller holds the lock.
     */
    int generation(long p, boolean superpage) {
        return gens[(int) (p >>> 9)][superpage ? 0 : (int) (p & 511)];
    }

    /** Pages with an entry. Caller holds the lock (either mode). */
    long mapped() {
        return mapped;
    }

    /** 2 MiB entries. Caller holds the lock (either mode). */
    long superpages() {
        return superpages;
    }

    /** Makes the 4 KiB leaves of pages first..first+n where missing (an allocated IOVA range gets its leaves). Write lock. */
    void ensureLeaves(int first, int n) {
        assert lock.isWriteLocked();
        for (int leaf = first >>> 9; leaf <= (first + n - 1) >>> 9; leaf++) {
            if (entries[leaf] == null && supers[leaf] == 0) {
                entries[leaf] = new long[512];
            }
            if (gens[leaf] == null) {
                gens[leaf] = new int[512];
            }
        }
    }

    /**
     * Writes the entries of pages first..first+n for frames pfns[0..n) and counts them mapped;
     * caller holds the write lock and has checked the pages are unmapped. Where a whole leaf
     * (512-aligned IOVA pages) receives the 512 frames of one huge page in order, it writes one
     * 2 MiB entry instead, as {@code iommu_map} picks the largest page size the IOVA and the
     * physical address are both aligned to ({@code iommu_pgsize}).
     */
    void fill(int first, long[] pfns, int[] gen, int n, DmaDirection dir) {
        assert lock.isWriteLocked();
        long flags = flags(dir);
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
     * Writes RESOURCE entries for pages first..first+n onto BAR pages from {@code offset} of
     * {@code r} and counts them mapped; caller holds the write lock, the pages are unmapped.
     */
    void fillResource(int first, int n, long offset, BarResource r, DmaDirection dir) {
        assert lock.isWriteLocked();
        long flags = flags(dir) | RESOURCE;
        for (int i = 0; i < n; i++) {
            int page = first + i;
            if (resources[page >>> 9] == null) {
                resources[page >>> 9] = new BarResource[512];
            }
            entries[page >>> 9][page & 511] = (((offset >>> PAGE_SHIFT) + i) << PAGE_SHIFT) | flags;
            resources[page >>> 9][page & 511] = r;
        }
        mapped += n;
    }

    /**
     * The first of pages [from, to) whose state differs from {@code linked} (an entry present
     * when it should not be, or missing when it should), or -1. Walks a leaf at a time: a leaf
     * with a 2 MiB entry is linked throughout, one with neither entry nor 4 KiB leaf is linked
     * nowhere, so a 2 MiB granule costs one look, not 512. Write lock.
     */
    int firstMismatch(int from, int to, boolean linked) {
        assert lock.isWriteLocked();
        for (int page = from; page < to; ) {
            int l = page >>> 9;
            int leafEnd = Math.min(to, (l + 1) << 9);
            if (supers[l] != 0 || entries[l] == null) {
                if ((supers[l] != 0) != linked) {
                    return page;
                }
            } else {
                for (int q = page; q < leafEnd; q++) {
                    if ((entries[l][q & 511] != 0) != linked) {
                        return q;
                    }
                }
            }
            page = leafEnd;
        }
        return -1;
    }

    /** The first page of [from, to) with an entry, or -1; skips leaves that map nothing. Write lock. */
    int firstEntry(int from, int to) {
        return firstMismatch(from, to, false);
    }

    /**
     * Clears the entries of pages first..first+n, each mapped, and counts them unmapped: a 2 MiB
     * entry the pages cover whole goes in one step, one they cover in part is split into its 512
     * 4 KiB entries first (as unmapping part of a superpage splits it). Write lock.
     */
    void clear(int first, int n) {
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
     * freed, stale for every page if it was. Write lock.
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

    /** Clears one 4 KiB entry: a frame loses its DMA reference, a BAR page its resource. Write lock. */
    private void release(int page) {
        long e = entries[page >>> 9][page & 511];
        entries[page >>> 9][page & 511] = 0;
        if ((e & RESOURCE) != 0) {
            resources[page >>> 9][page & 511] = null;
        } else {
            phys.dmaRef(e >>> PAGE_SHIFT, -1);
        }
    }

    /** Removes every entry (the domain's destruction), dropping each DMA reference. Write lock. */
    void clearAll() {
        assert lock.isWriteLocked();
        for (int l = 0; l < supers.length; l++) {
            if (supers[l] != 0) {
                phys.dmaRef(supers[l] >>> PAGE_SHIFT, -1);
                supers[l] = 0;
            }
            if (entries[l] != null) {
                for (int i = 0; i < 512; i++) {
                    if (entries[l][i] != 0) {
                        release((l << 9) | i);
                    }
                }
            }
        }
        superpages = 0;
        mapped = 0;
    }
}
