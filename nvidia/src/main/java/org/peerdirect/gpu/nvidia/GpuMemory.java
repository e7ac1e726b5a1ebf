package org.peerdirect.gpu.nvidia;

import java.util.BitSet;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The resource manager's books of one GPU's video-memory pages and BAR1 slots, kept in step with
 * the GPU through its firmware ({@link GpuFw}): the RM's heap ({@code mem_mgr}) and BAR1
 * ({@code kern_bus}) managers as far as this driver needs them. A page is in use while anything
 * references it (its allocation, a pin, an exported dma-buf); the GPU is told to free it with its
 * last reference. Slots are handed out cyclically, so a slot just given back is the last to be
 * reused and a stray peer access to it is caught by the IOMMU audit rather than landing in
 * someone else's page.
 *
 * <p>Lock: every method needs the RM's monitor ({@code rmLock}), as the tables it guards.
 */
final class GpuMemory {

    private final Object rmLock;
    private final String name;
    final GpuFw gpu;
    /** Video-memory pages in use: allocations and orphans of persistent pins. */
    private final BitSet usedPages = new BitSet();
    /** References per page: 1 for its allocation, +1 per page table or dma-buf holding it. */
    private final int[] pageRefs;
    private final BitSet usedSlots = new BitSet();
    private int slotHint;

    GpuMemory(Object rmLock, String name, GpuFw gpu) {
        this.rmLock = rmLock;
        this.name = name;
        this.gpu = gpu;
        this.pageRefs = new int[gpu.vramPages];
    }

    /**
     * {@code n} free pages, first fit (a run of consecutive pages is one VMA), allocated on the
     * GPU, one reference each.
     *
     * @throws KernelException ENOMEM when fewer are free
     */
    int[] allocPages(int n) {
        assert Thread.holdsLock(rmLock);
        int free = gpu.vramPages - usedPages.cardinality();
        if (n > free) {
            throw new KernelException(Errno.ENOMEM, String.format("cuMemAlloc on %s: CUDA_ERROR_OUT_OF_MEMORY (%d pages of 64 KiB asked, %d free)",
                    name, n, free));
        }
        int[] pages = new int[n];
        int at = 0;
        for (int p = usedPages.nextClearBit(0); at < n; p = usedPages.nextClearBit(p + 1)) {
            pages[at++] = p;
        }
        gpu.vramAlloc(pages);
        for (int p : pages) {
            usedPages.set(p);
            pageRefs[p] = 1;
        }
        return pages;
    }

    /** Gives back pages {@link #allocPages} returned and nobody else references. */
    void freePages(int[] pages) {
        assert Thread.holdsLock(rmLock);
        for (int p : pages) {
            pageRefs[p] = 0;
            usedPages.clear(p);
        }
        gpu.vramFree(pages);
    }

    /** One more reference of each page. */
    void ref(int[] pages) {
        assert Thread.holdsLock(rmLock);
        for (int p : pages) {
            pageRefs[p]++;
        }
    }

    /** Drops one reference of each page; a page whose last reference goes is free again, on the GPU too. */
    void unref(int[] pages) {
        assert Thread.holdsLock(rmLock);
        int[] gone = new int[pages.length];
        int n = 0;
        for (int p : pages) {
            if (--pageRefs[p] == 0) {
                usedPages.clear(p);
                gone[n++] = p;
            }
        }
        gpu.vramFree(java.util.Arrays.copyOf(gone, n));
    }

    int freeSlots() {
        assert Thread.holdsLock(rmLock);
        return gpu.bar1Slots - usedSlots.cardinality();
    }

    /** Free slots for the pages, mapped onto them on the GPU; the caller checked {@link #freeSlots}. */
    int[] mapSlots(int[] pages) {
        assert Thread.holdsLock(rmLock);
        int[] slots = allocSlots(pages.length);
        try {
            gpu.bar1Map(slots, pages);
        } catch (RuntimeException e) {
            for (int s : slots) {
                usedSlots.clear(s);
            }
            throw e;
        }
        return slots;
    }

    /** Unmaps the slots on the GPU (nothing reaches their pages through them afterwards) and frees them. */
    void unmapSlots(int[] slots) {
        assert Thread.holdsLock(rmLock);
        gpu.bar1Unmap(slots);
        for (int s : slots) {
            usedSlots.clear(s);
        }
    }

    /** n free slots, contiguous from the cyclic hint if possible, else wherever they are. */
    private int[] allocSlots(int n) {
        int total = gpu.bar1Slots;
        int[] slots = new int[n];
        int start = -1;
        for (int pass = 0; pass < 2 && start < 0; pass++) {
            int s = usedSlots.nextClearBit(pass == 0 ? slotHint : 0);
            while (s + n <= total) {
                int next = usedSlots.nextSetBit(s);
                if (next < 0 || next >= s + n) {
                    start = s;
                    break;
                }
                s = usedSlots.nextClearBit(next);
            }
        }
        if (start >= 0) {
            for (int i = 0; i < n; i++) {
                slots[i] = start + i;
            }
        } else { // fragmented: any free slots
            int at = 0;
            for (int s = usedSlots.nextClearBit(0); at < n; s = usedSlots.nextClearBit(s + 1)) {
                slots[at++] = s;
            }
        }
        for (int s : slots) {
            usedSlots.set(s);
        }
        slotHint = (slots[n - 1] + 1) % total;
        return slots;
    }

    /** Pages in use now (a copy). */
    BitSet usedPages() {
        assert Thread.holdsLock(rmLock);
        return (BitSet) usedPages.clone();
    }

    int usedPageCount() {
        assert Thread.holdsLock(rmLock);
        return usedPages.cardinality();
    }

    int usedSlotCount() {
        assert Thread.holdsLock(rmLock);
        return usedSlots.cardinality();
    }
}
