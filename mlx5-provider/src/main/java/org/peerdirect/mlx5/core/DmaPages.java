package org.peerdirect.mlx5.core;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.mm.Mm;

/**
 * The driver's DMA-coherent 4 KiB pages ({@code dma_alloc_coherent} for one page): a kernel page,
 * mapped through the function's IOMMU domain. The command queue, mailboxes, EQ rings and firmware
 * pages come from here; every page is unmapped and freed by {@link #free} or, when the driver
 * goes, {@link #freeAll}, so the audit sees nothing left.
 *
 * <p>Thread-safe: the live set is concurrent; a page is freed by one owner.
 */
final class DmaPages {

    /** One mapped page: its frame, its bus address (IOVA) and the kernel's view of its bytes. */
    record Page(long pfn, long iova, MemorySegment mem) {
    }

    private final Mm mm;
    private final DmaMapper dma;
    private final Set<Page> live = ConcurrentHashMap.newKeySet();

    DmaPages(Mm mm, DmaMapper dma) {
        this.mm = mm;
        this.dma = dma;
    }

    /** A zeroed page mapped for the device. */
    Page alloc() {
        long pfn = mm.allocPages(0);
        long iova;
        try {
            iova = dma.dmaMapPage(pfn, DmaDirection.BIDIRECTIONAL);
        } catch (RuntimeException e) {
            mm.freePages(pfn, 0);
            throw e;
        }
        MemorySegment mem = mm.pageAddress(pfn, 0);
        mem.fill((byte) 0);
        Page p = new Page(pfn, iova, mem);
        live.add(p);
        return p;
    }

    void free(Page p) {
        if (live.remove(p)) {
            try {
                dma.dmaUnmap(p.iova(), 1);
            } finally {
                mm.freePages(p.pfn(), 0);
            }
        }
    }

    /** Unmaps and frees every page still live (the driver's last act). */
    void freeAll() {
        for (Page p : live.toArray(Page[]::new)) {
            free(p);
        }
    }

    int live() {
        return live.size();
    }
}
