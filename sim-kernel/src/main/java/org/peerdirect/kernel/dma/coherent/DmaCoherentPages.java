package org.peerdirect.kernel.dma.coherent;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.mm.Mm;

/**
 * A driver's DMA-coherent memory ({@code dma_alloc_coherent}, managed as
 * {@code dmam_alloc_coherent}'s is): a zeroed block of physically contiguous kernel pages (one
 * 4 KiB page, or {@code 2^order} of them) mapped through the function's IOMMU domain as one
 * contiguous bus-address range, read and written by the device and the CPU alike
 * (bidirectional). Command queues, mailboxes, EQ rings, firmware pages, the firmware area and ICM
 * of mlx4 and mlx5, NVMe's submission and completion queues, the GPU's message queues and staging
 * buffer come from here; {@link #freeAll} gives back whatever is left when the driver goes, so
 * the audit finds nothing mapped. One class for every driver (mlx4 and mlx5 each kept a copy
 * before; nvme and nvidia mapped their own).
 *
 * @see "dma_alloc_coherent() in kernel/dma/mapping.c, dmam_alloc_coherent()"
 *
 * <p>Thread-safe: the live set is concurrent; a page is freed by one owner.
 */
public final class DmaCoherentPages {

    /**
     * One mapped block: its first frame, its bus address and the kernel's view of its bytes
     * ({@code 4 KiB << order} of them).
     */
    public record Page(long pfn, long iova, MemorySegment mem) {

        /** The 4 KiB pages of the block. */
        public int pages() {
            return (int) (mem.byteSize() >>> 12);
        }

        /** The block's order ({@code 2^order} pages). */
        int order() {
            return Integer.numberOfTrailingZeros(pages());
        }
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
        return alloc(0);
    }

    /**
     * A zeroed block of {@code 2^order} physically contiguous pages mapped for the device as one
     * contiguous bus-address range ({@code dma_alloc_coherent} of {@code 4 KiB << order} bytes:
     * the kernel allocates coherent memory by order too). Nothing stays allocated or mapped when
     * it fails.
     *
     * @throws IllegalArgumentException for an order outside 0..10 (4 KiB to 4 MiB, the buddy allocator's {@code MAX_ORDER})
     * @since 0.2
     */
    public Page alloc(int order) {
        if (order < 0 || order > 10) {
            throw new IllegalArgumentException("dma_alloc_coherent of order " + order + ": 0 to 10 (4 KiB to 4 MiB)");
        }
        long pfn = mm.allocPages(order);
        long iova;
        try {
            iova = order == 0 ? dma.dmaMapPage(pfn, DmaDirection.BIDIRECTIONAL) : dma.dmaMapSg(frames(pfn, 1 << order), DmaDirection.BIDIRECTIONAL);
        } catch (RuntimeException e) {
            mm.freePages(pfn, order);
            throw e;
        }
        MemorySegment mem = mm.pageAddress(pfn, order);
        mem.fill((byte) 0);
        Page p = new Page(pfn, iova, mem);
        live.add(p);
        return p;
    }

    private static long[] frames(long pfn, int n) {
        long[] r = new long[n];
        for (int i = 0; i < n; i++) {
            r[i] = pfn + i;
        }
        return r;
    }

    /** Unmaps (if still mapped) and frees the page. */
    public void free(Page p) {
        if (p == null) {
            return;
        }
        if (live.remove(p)) {
            try {
                dma.dmaUnmap(p.iova(), p.pages());
            } finally {
                held.remove(p);
                mm.freePages(p.pfn(), p.order());
            }
        } else if (held.remove(p)) {
            mm.freePages(p.pfn(), p.order()); // freeAll unmapped it
        }
    }

    /** Unmaps every page still live (the driver's last act) and frees it, unless its owner holds the frame ({@link #allocHeld}). */
    public void freeAll() {
        for (Page p : live.toArray(Page[]::new)) {
            if (held.contains(p)) {
                if (live.remove(p)) {
                    dma.dmaUnmap(p.iova(), p.pages());
                }
            } else {
                free(p);
            }
        }
    }

    /** 4 KiB pages mapped now (a block of order n counts 2^n). */
    public int live() {
        return live.stream().mapToInt(Page::pages).sum();
    }
}
