package org.peerdirect.kernel.iommu;

import java.util.BitSet;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.StampedLock;

/**
 * One domain's I/O virtual address allocator ({@code drivers/iommu/iova.c}, {@code struct
 * iova_domain}): which IOVA pages are allocated, counted in pages from the domain's base, and
 * the ranges {@code dma_iova_try_alloc} reserved ({@code drivers/iommu/dma-iommu.c}). It hands
 * out page numbers only; what they map is the page table's ({@link IoPageTable}).
 *
 * <p>Locks: every method needs the domain's write lock and asserts it ({@code StampedLock} has no
 * owner: the assertion checks the mode). Invariants: {@link #usedPages} is the number of set bits
 * of {@link #used}; every page of a range in {@link #ranges} is set in {@link #used}; ranges do
 * not overlap.
 */
final class IovaDomain {

    private final StampedLock lock;
    private final int pages;
    /** IOVA pages allocated: mapped, or in a range of {@code dma_iova_try_alloc}. */
    private final BitSet used = new BitSet();
    /** The ranges of {@code dma_iova_try_alloc} (linked or not): first page → pages. */
    private final TreeMap<Integer, Integer> ranges = new TreeMap<>();
    /** Where the next search starts ({@code cached_node} of iova.c, searching upwards here). */
    private int hint;
    private long usedPages;

    IovaDomain(StampedLock lock, int pages) {
        this.lock = lock;
        this.pages = pages;
    }

    /** Pages allocated now. Write lock. */
    long usedPages() {
        assert lock.isWriteLocked();
        return usedPages;
    }

    /** Whether IOVA page {@code page} is allocated. Write lock. */
    boolean allocated(int page) {
        assert lock.isWriteLocked();
        return used.get(page);
    }

    /**
     * {@code alloc_iova}: the first free run of {@code n} IOVA pages from the hint, then from 0,
     * marked allocated; -1 when none is free. A run of 2 MiB or more starts on a 2 MiB boundary,
     * as iova.c aligns a range to its size ({@code size_aligned}, capped here at 2 MiB), so a
     * huge page mapped into it can take a 2 MiB entry. Write lock.
     */
    int allocIova(int n) {
        assert lock.isWriteLocked();
        int first = findRange(n);
        if (first >= 0) {
            used.set(first, first + n);
            hint = first + n;
            usedPages += n;
        }
        return first;
    }

    private int findRange(int n) {
        int align = n >= IoPageTable.SUPER_PAGES ? IoPageTable.SUPER_PAGES : 1;
        for (int pass = 0; pass < 2; pass++) {
            int from = pass == 0 ? hint : 0;
            int s = alignUp(used.nextClearBit(from), align);
            while (s + n <= pages) {
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

    /** {@code free_iova} of pages first..first+n, each allocated. Write lock. */
    void freeIova(int first, int n) {
        assert lock.isWriteLocked();
        used.clear(first, first + n);
        usedPages -= n;
    }

    /** Records pages first..first+n, just allocated, as a range of {@code dma_iova_try_alloc}. Write lock. */
    void addRange(int first, int n) {
        assert lock.isWriteLocked();
        ranges.put(first, n);
    }

    /** The pages of the range starting at {@code first}, or null when none starts there. Write lock. */
    Integer range(int first) {
        assert lock.isWriteLocked();
        return ranges.get(first);
    }

    /** Forgets the range starting at {@code first} (its pages stay allocated until {@link #freeIova}). Write lock. */
    void removeRange(int first) {
        assert lock.isWriteLocked();
        ranges.remove(first);
    }

    /**
     * The end (exclusive) of the range holding page {@code page}, or {@code page} itself when no
     * range holds it. Write lock.
     */
    int rangeEnd(int page) {
        assert lock.isWriteLocked();
        Map.Entry<Integer, Integer> r = ranges.floorEntry(page);
        return r == null ? page : Math.max(page, r.getKey() + r.getValue());
    }

    /** The first page of [from, to) that lies in a range, or -1. Write lock. */
    int firstRangePage(int from, int to) {
        assert lock.isWriteLocked();
        Map.Entry<Integer, Integer> r = ranges.floorEntry(from);
        if (r != null && r.getKey() + r.getValue() > from) {
            return from;
        }
        Integer next = ranges.ceilingKey(from);
        return next != null && next < to ? next : -1;
    }

    /** Frees everything (the domain's destruction). Write lock. */
    void clear() {
        assert lock.isWriteLocked();
        used.clear();
        ranges.clear();
        usedPages = 0;
    }
}
