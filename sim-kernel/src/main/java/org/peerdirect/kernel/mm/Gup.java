package org.peerdirect.kernel.mm;

import static org.peerdirect.kernel.mm.Mm.PAGE_SHIFT;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * Pinning of an {@link AddressSpace}'s pages, as mm/gup.c ({@code pin_user_pages},
 * {@code unpin_user_pages}), with the {@code mm->pinned_vm} accounting against RLIMIT_MEMLOCK
 * that {@code ib_umem_get} does around it.
 *
 * <p>Holds no state: each method works on the {@code mm} it is given. Invariant: every pinned
 * page is charged to {@code mm.pinnedVm}; a pin and its charge go back together.
 */
final class Gup {

    /** The most pages one {@link #pinUserPages} call pins: its frame list is an array. */
    static final long MAX_PIN_PAGES = Integer.MAX_VALUE;

    private Gup() {
    }

    /**
     * Check and add in one step (compare-and-set), so {@code mm.pinnedVm} never exceeds the
     * limit, not even for a moment: {@code ib_umem_get} adds first and takes the charge back if
     * it went over, and meanwhile a concurrent charge that fits alone fails on that transient.
     *
     * @see AddressSpace#chargePinnedVm
     */
    static void chargePinnedVm(AddressSpace mm, long npages) {
        if (npages < 0) {
            throw new KernelException(Errno.EINVAL, "negative pinned_vm charge " + npages);
        }
        for (;;) {
            long now = mm.pinnedVm.get();
            long limit = mm.memlockLimitPages;
            if (npages > limit - now) { // both are >= 0: no overflow
                throw new KernelException(Errno.ENOMEM, String.format(
                        "%d pages would exceed RLIMIT_MEMLOCK (%d pages, %d already pinned); raise the limit (ulimit -l / setMemlockLimit)",
                        npages, limit, now));
            }
            if (mm.pinnedVm.compareAndSet(now, now + npages)) {
                return;
            }
        }
    }

    /**
     * Check and subtract in one step, like {@link #chargePinnedVm}: an uncharge that is refused
     * never lowers {@code mm.pinnedVm}, even for a moment (a concurrent charge could pass the
     * limit on that dip).
     *
     * @see AddressSpace#unchargePinnedVm
     */
    static void unchargePinnedVm(AddressSpace mm, long npages) {
        if (npages < 0) {
            throw new KernelException(Errno.EINVAL, "negative pinned_vm uncharge " + npages + " (use chargePinnedVm to charge)");
        }
        for (;;) {
            long now = mm.pinnedVm.get();
            if (npages > now) {
                throw new KernelException(Errno.EINVAL, String.format(
                        "pinned_vm uncharge of %d pages exceeds the charge (%d pages pinned)", npages, now));
            }
            if (mm.pinnedVm.compareAndSet(now, now - npages)) {
                return;
            }
        }
    }

    /**
     * @see AddressSpace#pinUserPages
     * @see "pin_user_pages() in mm/gup.c"
     */
    static PinnedPages pinUserPages(AddressSpace mm, long va, long length, boolean write) {
        if (length <= 0 || va < 0 || va + length < va || va + length > PageTable.TASK_SIZE) {
            throw new KernelException(Errno.EINVAL, String.format("pin_user_pages: bad range 0x%x + %d", va, length));
        }
        long start = va & -PAGE_SIZE;
        long end = (va + length + PAGE_SIZE - 1) & -PAGE_SIZE;
        long pages = (end - start) >>> PAGE_SHIFT;
        if (pages > MAX_PIN_PAGES) {
            // as ib_umem_get() refuses npages > UINT_MAX with EINVAL, before charging anything;
            // here the bound is the frame array's
            throw new KernelException(Errno.EINVAL, String.format(
                    "pin_user_pages: 0x%x + %d bytes is %d pages, more than the %d one call can pin",
                    va, length, pages, MAX_PIN_PAGES));
        }
        int npages = (int) pages;
        chargePinnedVm(mm, npages);
        long[] pfns = new long[npages];
        // pages pinned so far stay pinned across a reclaim retry: reclaim cannot take them, so each
        // retry either makes progress or ends in ENOMEM
        int pinned = 0;
        for (;;) {
            long stamp = mm.mmapLock.readLock();
            try {
                mm.alive();
                for (; pinned < npages; pinned++) {
                    long p = start + ((long) pinned << PAGE_SHIFT);
                    Vma v = Mmap.findVma(mm, p);
                    if (v == null) {
                        throw new KernelException(Errno.EFAULT, String.format("pin_user_pages: 0x%x is not mapped", p));
                    }
                    if (v.kind() == Vma.Kind.DEVICE) {
                        throw new KernelException(Errno.EFAULT, String.format(
                                "pin_user_pages: 0x%x is in device mapping %s (VM_IO|VM_PFNMAP): it has no pages to pin", p, v.name()));
                    }
                    if (write && !v.writable() || !v.readable()) {
                        throw new KernelException(Errno.EFAULT, String.format(
                                "pin_user_pages: 0x%x: mapping %s does not allow %s", p, v.name(), write ? "writing" : "reading"));
                    }
                    if (write && v.kind() == Vma.Kind.FILE) {
                        throw new KernelException(Errno.EFAULT, String.format(
                                "pin_user_pages: 0x%x is in file mapping %s: writable long-term pins of file-backed memory are refused (as Linux 6.5+ does); use ODP or anonymous memory",
                                p, v.name()));
                    }
                    long pfn = Memory.resolve(mm, p, write) >>> PAGE_SHIFT;
                    mm.phys.pin(pfn, 1);
                    pfns[pinned] = pfn;
                }
                return new PinnedPages(mm, start, pfns);
            } catch (RuntimeException e) {
                if (e != Memory.FaultRetry.INSTANCE) {
                    unpinPartial(mm, pfns, pinned, npages);
                    throw e;
                }
            } finally {
                mm.mmapLock.unlockRead(stamp);
            }
            try {
                Memory.reclaimForFault(mm);
            } catch (KernelException e) {
                unpinPartial(mm, pfns, pinned, npages);
                throw e;
            }
        }
    }

    /** Undoes a failed {@link #pinUserPages}: unpins the first {@code pinned} pages, returns the whole charge. */
    private static void unpinPartial(AddressSpace mm, long[] pfns, int pinned, int charged) {
        for (int i = 0; i < pinned; i++) {
            unpinPage(mm, pfns[i]);
        }
        mm.pinnedVm.addAndGet(-charged);
    }

    /**
     * Unpins every page of {@code pages} and returns their charge; {@link PinnedPages#unpin}
     * makes sure it runs once.
     *
     * @see "unpin_user_pages() in mm/gup.c"
     */
    static void unpinUserPages(AddressSpace mm, PinnedPages pages) {
        for (int i = 0; i < pages.npages(); i++) {
            unpinPage(mm, pages.pfn(i));
        }
        mm.pinnedVm.addAndGet(-pages.npages());
    }

    /** Drops one pin; the frame is freed if it was the last and nothing maps the frame any more. */
    private static void unpinPage(AddressSpace mm, long pfn) {
        if (mm.phys.pin(pfn, -1) == 0) {
            mm.kernel.releaseIfUnused(pfn);
        }
    }
}
