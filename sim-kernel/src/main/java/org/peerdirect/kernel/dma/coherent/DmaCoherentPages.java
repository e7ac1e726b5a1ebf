package org.peerdirect.kernel.dma.coherent;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.mm.Mm;

/**
 * A driver's DMA-coherent 4 KiB pages ({@code dma_alloc_coherent} of one page, managed as
 * {@code dmam_alloc_coherent}'s are): a kernel page mapped through the function's IOMMU domain.
 * Command queues, mailboxes, EQ rings, firmware pages, the firmware area and ICM come from here;
 * {@link #freeAll} gives back whatever is left when the driver goes, so the audit finds nothing
 * mapped. One class for every driver (mlx4 and mlx5 each kept a copy before).
 *
 * @see "dma_alloc_coherent() in kernel/dma/mapping.c, dmam_alloc_coherent()"
 *
 * <p>Thread-safe: the live set is concurrent; a page is freed by one owner.
 */
public final class DmaCoherentPages {

    /** One mapped page: its frame, its bus address and the kernel's view of its bytes. */
    public record Page(long pfn, long iova, MemorySegment mem) {
    }

    private final Mm mm;
    private final DmaMapper dma;
    private final Set<Page> live = ConcurrentHashMap.newKeySet();
    /** Pages of {@link #allocHeld}: their frames are freed by {@link #free} only. */
    private final Set<Page> held = ConcurrentHashMap.newKeySet();

    public DmaCoherentPages(Mm mm, DmaMapper dma) {
        this.mm = mm;
        this.dma = dma;
    }

    /**
     * A zeroed page mapped for the device whose frame stays its owner's after the driver is gone:
     * {@link #freeAll} unmaps it (the device reaches it no more) but only the owner's
     * {@link #free} gives the frame back. For memory a user still reads after a removal, as a
     * CQ's ring (libmlx4's buffer is the process's memory, not the device's).
     */
    public Page allocHeld() {
        Page p = alloc();
        held.add(p);
        return p;
    }

    /** A zeroed page mapped for the device. */
    public Page alloc() {
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

    /** Unmaps (if still mapped) and frees the page. */
    public void free(Page p) {
        if (p == null) {
            return;
        }
        if (live.remove(p)) {
            try {
                dma.dmaUnmap(p.iova(), 1);
            } finally {
                held.remove(p);
                mm.freePages(p.pfn(), 0);
            }
        } else if (held.remove(p)) {
            mm.freePages(p.pfn(), 0); // freeAll unmapped it
        }
    }

    /** Unmaps every page still live (the driver's last act) and frees it, unless its owner holds the frame ({@link #allocHeld}). */
    public void freeAll() {
        for (Page p : live.toArray(Page[]::new)) {
            if (held.contains(p)) {
                if (live.remove(p)) {
                    dma.dmaUnmap(p.iova(), 1);
                }
            } else {
                free(p);
            }
        }
    }

    /** Pages mapped now. */
    public int live() {
        return live.size();
    }
}
