package org.peerdirect.kernel.mm;

import static org.peerdirect.kernel.mm.Mm.HPAGE_SIZE;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.LongStream;

import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/**
 * Taking pages away from an {@link AddressSpace} and writing them back: reclaim (mm/vmscan.c),
 * {@code madvise} (mm/madvise.c), migration (mm/migrate.c) and {@code msync} (mm/msync.c).
 *
 * <p>Holds no state: each method works on the {@code mm} it is given. All of it runs under the
 * mmap lock in write mode, with notifiers told first, so no fault, pin or HMM walk sees a page
 * half moved. Pinned pages are never reclaimed or migrated.
 */
final class Vmscan {

    private Vmscan() {
    }

    /**
     * @see AddressSpace#madvise
     * @see "madvise_dontneed_free() and madvise_pageout() in mm/madvise.c"
     */
    static long madvise(AddressSpace mm, long addr, long length, AddressSpace.Advice advice) {
        return Mmap.onMappedRange(mm, addr, length, "madvise", (start, end) -> {
            // every VMA is checked before the notifiers run, so a refused call changes nothing
            List<Vma> parts = new ArrayList<>();
            for (Vma v : Mmap.vmasIn(mm, start, end)) {
                Vma part = madviseRange(v, advice);
                if (part != null) {
                    parts.add(part);
                }
            }
            if (parts.isEmpty()) {
                return 0;
            }
            long[] n = {0};
            mm.invalidate(parts.getFirst().start(), parts.getLast().end(), MmuNotifierEvent.CLEAR, () -> {
                for (Vma v : parts) {
                    n[0] += advice == AddressSpace.Advice.MADV_DONTNEED ? Memory.zapPageRange(mm, v) : pageout(mm, v, Long.MAX_VALUE);
                }
            });
            return n[0];
        });
    }

    /**
     * The part of {@code v} (a VMA clipped to the madvise range) that {@code advice} works on, or
     * null when none; EINVAL where Linux refuses the VMA. Device mappings have no pages to drop.
     * Huge pages go whole: a hugetlb range must start on a huge page boundary and its end is
     * rounded down to one, so a caller that thinks in 4 KiB pages loses no data past its range;
     * reclaim does not page hugetlb memory out.
     *
     * @see "madvise_dontneed_free_valid_vma() and can_madv_lru_vma() in mm/madvise.c"
     */
    private static Vma madviseRange(Vma v, AddressSpace.Advice advice) {
        if (v.kind() == Vma.Kind.DEVICE) {
            throw new KernelException(Errno.EINVAL, String.format(
                    "madvise(%s): 0x%x-0x%x is in device mapping %s (VM_IO|VM_PFNMAP): it has no pages to drop",
                    advice, v.start(), v.end(), v.name()));
        }
        if (v.kind() != Vma.Kind.HUGETLB) {
            return v;
        }
        if (advice != AddressSpace.Advice.MADV_DONTNEED) {
            throw new KernelException(Errno.EINVAL, String.format(
                    "madvise(%s): 0x%x-0x%x is in hugetlb mapping %s: huge pages are not paged out",
                    advice, v.start(), v.end(), v.name()));
        }
        if ((v.start() & (HPAGE_SIZE - 1)) != 0) {
            throw new KernelException(Errno.EINVAL, String.format(
                    "madvise(%s): 0x%x is inside a 2 MiB huge page of hugetlb mapping %s: the range must start on a huge page boundary",
                    advice, v.start(), v.name()));
        }
        long end = v.end() & -HPAGE_SIZE;
        return end == v.start() ? null : v.slice(v.start(), end);
    }

    /**
     * Reclaims present, unpinned 4 KiB pages of a VMA part, at most {@code max}: anonymous pages
     * go to swap (while it has free slots), file pages are written back if dirty and dropped.
     * Caller holds write, inside an invalidation of the range. Returns the pages reclaimed.
     *
     * @see "reclaim_pages() and pageout() in mm/vmscan.c"
     */
    private static long pageout(AddressSpace mm, Vma v, long max) {
        assert mm.mmapLock.isWriteLocked();
        PhysicalMemory phys = mm.phys;
        long[] n = {0};
        mm.pt.forEachEntry(v.start(), v.end(), (va, e) -> {
            if (n[0] >= max || (e & PageTable.PRESENT) == 0 || (e & PageTable.HUGE) != 0) {
                return;
            }
            long pfn = PageTable.pfn(e);
            if (phys.pinCount(pfn) != 0) {
                return; // pinned pages are never reclaimed
            }
            if (v.file() != null) {
                if ((e & PageTable.DIRTY) != 0) {
                    v.file().writePage(v.offsetOf(va), phys.frame(pfn));
                }
                mm.pt.setPte(va, 0);
            } else {
                long slot = mm.kernel.swap().allocSlot();
                if (slot < 0) {
                    return;
                }
                mm.kernel.swap().write(slot, phys.frame(pfn));
                mm.pt.setPte(va, PageTable.entry(slot, PageTable.SWAP));
                mm.swapped.incrementAndGet();
            }
            phys.setRmap(pfn, 0);
            mm.kernel.releaseIfUnused(pfn);
            mm.rss.decrementAndGet();
            n[0]++;
        });
        return n[0];
    }

    /**
     * Reclaim entry point for {@link Mm#reclaim}: pages out up to {@code max} pages of the
     * anonymous and file mappings if the mmap lock is free now. A trylock, as reclaim must not
     * wait for a busy process, and {@link #migrate} allocates (so may reclaim) holding this
     * address space's write lock, which is not reentrant. Returns the pages reclaimed.
     *
     * @see "shrink_folio_list() in mm/vmscan.c"
     */
    static long tryReclaim(AddressSpace mm, long max) {
        long stamp = mm.mmapLock.tryWriteLock();
        if (stamp == 0) {
            return 0;
        }
        try {
            if (mm.dead) {
                return 0;
            }
            long n = 0;
            for (Vma v : new ArrayList<>(mm.vmas.values())) {
                if (n >= max) {
                    break;
                }
                if (v.kind() == Vma.Kind.ANON || v.kind() == Vma.Kind.FILE) {
                    long want = max - n;
                    long[] got = {0};
                    mm.invalidate(v.start(), v.end(), MmuNotifierEvent.CLEAR, () -> got[0] = pageout(mm, v, want));
                    n += got[0];
                }
            }
            return n;
        } finally {
            mm.mmapLock.unlockWrite(stamp);
        }
    }

    /**
     * @see AddressSpace#migrate
     * @see "migrate_pages() in mm/migrate.c"
     */
    static long migrate(AddressSpace mm, long addr, long length) {
        PhysicalMemory phys = mm.phys;
        return Mmap.onMappedRange(mm, addr, length, "migrate", (start, end) -> {
            long[] n = {0};
            mm.invalidate(start, end, MmuNotifierEvent.MIGRATE, () -> mm.pt.forEachEntry(start, end, (va, e) -> {
                if ((e & PageTable.PRESENT) == 0 || (e & PageTable.HUGE) != 0) {
                    return;
                }
                long old = PageTable.pfn(e);
                if (phys.pinCount(old) != 0) {
                    return;
                }
                long nu = phys.allocPages(0, phys.kind(old), mm.rmap(va));
                MemorySegment.copy(phys.frame(old), 0, phys.frame(nu), 0, PAGE_SIZE);
                mm.pt.setPte(va, PageTable.entry(nu, e & PageTable.FLAGS_MASK));
                phys.setRmap(old, 0);
                mm.kernel.releaseIfUnused(old);
                n[0]++;
            }));
            return n[0];
        });
    }

    /**
     * Writes the dirty pages of the file mappings in [start, end) back, cleaning them as writeback
     * does: for each run of consecutive dirty pages, notifiers see PROTECTION_PAGE first (a device
     * mirroring the pages drops its writable mapping), then each entry loses WRITE with DIRTY and
     * the page goes to the file. The next write, the CPU's or a device's through
     * {@code hmm_range_fault}, faults and dirties the page again, so the next msync writes it too.
     * A page goes by its dirtiness, not its protection: dirty pages of a PROT_NONE mapping are
     * written as munmap and exit write them. Returns the pages written.
     *
     * <p>Linux writes back through the page cache, not the page table, and cleans each folio
     * with one invalidation per mapping; here a page has exactly one mapping and a run of them
     * shares one invalidation, which is the same for a device.
     *
     * @see AddressSpace#msync
     * @see "msync() in mm/msync.c; folio_clear_dirty_for_io(), folio_mkclean() and page_vma_mkclean_one() in mm/rmap.c"
     */
    static long msync(AddressSpace mm, long addr, long length) {
        return Mmap.onMappedRange(mm, addr, length, "msync", (start, end) -> {
            long n = 0;
            for (Vma v : Mmap.vmasIn(mm, start, end)) {
                if (v.file() == null) {
                    continue;
                }
                LongStream.Builder found = LongStream.builder();
                mm.pt.forEachEntry(v.start(), v.end(), (va, e) -> {
                    if ((e & PageTable.DIRTY) != 0 && (e & (PageTable.PRESENT | PageTable.PROTNONE)) != 0) {
                        found.add(va);
                    }
                });
                long[] dirty = found.build().toArray();
                int i = 0;
                while (i < dirty.length) {
                    int from = i;
                    do {
                        i++;
                    } while (i < dirty.length && dirty[i] == dirty[i - 1] + PAGE_SIZE);
                    int to = i;
                    mm.invalidate(dirty[from], dirty[to - 1] + PAGE_SIZE, MmuNotifierEvent.PROTECTION_PAGE, () -> {
                        for (int k = from; k < to; k++) {
                            writebackPage(mm, v, dirty[k]);
                        }
                    });
                    n += to - from;
                }
            }
            return n;
        });
    }

    /**
     * Cleans and writes back the dirty file page at va: write-protect first, then copy, so a
     * write that comes after the copy faults and dirties the page again. Caller holds write,
     * inside an invalidation of the page.
     *
     * @see "page_vma_mkclean_one() in mm/rmap.c"
     */
    private static void writebackPage(AddressSpace mm, Vma v, long va) {
        assert mm.mmapLock.isWriteLocked();
        long e = mm.pt.lookup(va);
        mm.pt.setEntry(va, e, e & ~(PageTable.WRITE | PageTable.DIRTY));
        v.file().writePage(v.offsetOf(va), mm.phys.frame(PageTable.pfn(e)));
    }
}
