package org.peerdirect.kernel.mm;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * What {@link AddressSpace#pinUserPages} returns: the pinned frames, in order, and the offset of
 * the first byte in the first page. Unpin exactly once ({@code unpin_user_pages_dirty_lock}).
 */
public final class PinnedPages {

    private final AddressSpace mm;
    private final long[] pfns;
    private final long start;
    private final AtomicBoolean unpinned = new AtomicBoolean();

    PinnedPages(AddressSpace mm, long start, long[] pfns) {
        this.mm = mm;
        this.start = start;
        this.pfns = pfns;
    }

    public long start() {
        return start;
    }

    public int npages() {
        return pfns.length;
    }

    public long pfn(int i) {
        return pfns[i];
    }

    public long[] pfns() {
        return pfns.clone();
    }

    public boolean isUnpinned() {
        return unpinned.get();
    }

    /**
     * Unpins every page and gives the pages back to the memlock accounting. A second call is an
     * error (double unpin) and changes nothing.
     *
     * @param dirty the kernel's "the device wrote these pages" (Linux marks the folios dirty, so
     *              writeback of a file page saves what the device wrote); kept for the original's
     *              signature, it changes nothing here: a device can write only through a writable
     *              pin, and those are refused on file mappings (see
     *              {@link AddressSpace#pinUserPages}), so every page it wrote is anonymous, and
     *              pinned pages are never swapped out; read pins of file pages are not written by
     *              the device, so no writeback can lose a DMA write
     */
    public void unpin(boolean dirty) {
        if (!unpinned.compareAndSet(false, true)) {
            throw new KernelException(KernelException.Errno.EINVAL,
                    String.format("double unpin of %d pages at 0x%x", pfns.length, start));
        }
        Gup.unpinUserPages(mm, this);
    }
}
