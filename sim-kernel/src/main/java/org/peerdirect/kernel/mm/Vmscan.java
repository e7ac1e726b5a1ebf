package org.peerdirect.kernel.mm;

import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;

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

    /** @see AddressSpace#madvise */
    static long madvise(AddressSpace mm, long addr, long length, AddressSpace.Advice advice) {
        return Mmap.onMappedRange(mm, addr, length, "madvise", (start, end) -> {
            long[] n = {0};
            mm.invalidate(start, end, MmuNotifierEvent.CLEAR, () -> {
                for (Vma v : Mmap.vmasIn(mm, start, end)) {
                    if (v.kind() == Vma.Kind.DEVICE) {
                        throw new KernelException(Errno.EINVAL, "madvise on device mapping " + v.name());
                    }
                    if (advice == AddressSpace.Advice.MADV_DONTNEED) {
                        n[0] += Memory.zapPageRange(mm, v);
                    } else if (v.kind() != Vma.Kind.HUGETLB) {
                        n[0] += pageout(mm, v, Long.MAX_VALUE);
                    }
                }
            });
            return n[0];
        });
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
     * @see AddressSpace#msync
     * @see "msync() in mm/msync.c"
     */
    static long msync(AddressSpace mm, long addr, long length) {
        return Mmap.onMappedRange(mm, addr, length, "msync", (start, end) -> {
            long[] n = {0};
            for (Vma v : Mmap.vmasIn(mm, start, end)) {
                if (v.file() == null) {
                    continue;
                }
                mm.pt.forEachEntry(v.start(), v.end(), (va, e) -> {
                    if ((e & (PageTable.PRESENT | PageTable.DIRTY)) == (PageTable.PRESENT | PageTable.DIRTY)) {
                        v.file().writePage(v.offsetOf(va), mm.phys.frame(PageTable.pfn(e)));
                        mm.pt.setPte(va, e & ~PageTable.DIRTY);
                        n[0]++;
                    }
                });
            }
            return n[0];
        });
    }
}
