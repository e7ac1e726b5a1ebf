package org.peerdirect.kernel.dma;

import org.osgi.annotation.versioning.ProviderType;

/**
 * The DMA API of one device ({@code dma_map_page}, {@code dma_map_sg}, {@code dma_unmap_*} of
 * {@code include/linux/dma-mapping.h}): the driver-side mapping calls, implemented by the
 * device's IOMMU domain. Once an unmap returns, no DMA through that mapping is in flight or will
 * ever happen.
 */
@ProviderType
public interface DmaMapper {

    /** {@code dma_map_page}: one frame; its IOVA. */
    long dmaMapPage(long pfn, DmaDirection dir);

    /** {@code dma_map_sg}: the frames become one contiguous IOVA range, in order; its start. */
    long dmaMapSg(long[] pfns, DmaDirection dir);

    /** {@code dma_unmap_*} of {@code npages} from {@code iova}; waits for DMA in flight. */
    void dmaUnmap(long iova, int npages);

    /**
     * {@code dma_map_resource}: maps [offset, offset+length) of another device's BAR (a GPU's
     * BAR1, an SSD's memory window; {@link DmaResource}, from its PCI function) for this
     * device's peer-to-peer DMA; its IOVA. Page-aligned; undone by {@link #dmaUnmap}.
     *
     * @since 2.0 (1.2 to 1.7 took the PCI function and the BAR index: this package no longer
     *        depends on the unreleased PCI package)
     */
    long dmaMapResource(DmaResource resource, long offset, long length, DmaDirection dir);

    /** Pages mapped now. */
    long mappedPages();

    /**
     * True when every page of [iova, iova+len) is mapped and maps persistent memory: a page of a
     * BAR whose device declares it a persistent memory region ({@code BarAperture#persistent}), as
     * the kernel's {@code is_pmem_page} asks {@code region_intersects(...,
     * IORES_DESC_PERSISTENT_MEMORY)}. Host frames are RAM: false. What a driver checks before it
     * grants {@code IB_ACCESS_FLUSH_PERSISTENT} (rxe's {@code rxe_mr_fill_pages_from_sgt}).
     *
     * @since 1.4
     */
    boolean persistent(long iova, long len);

    /**
     * {@code dma_iova_try_alloc}: reserves {@code size} bytes (rounded up to whole pages) of
     * contiguous I/O virtual space with nothing mapped in it, for a caller that maps and unmaps
     * pieces of one buffer over its life (the ODP umem, as {@code hmm_dma_map_alloc}). Returns
     * the range's start, or -1 where the kernel returns false: the caller then maps page by page
     * ({@link #dmaMapPage}). The range is given back by {@link #dmaIovaFree} once nothing is linked.
     *
     * @since 1.5
     */
    long dmaIovaTryAlloc(long size);

    /**
     * {@code dma_iova_link} and {@code dma_iova_sync}: maps frames {@code pfns[0..n)} at
     * {@code iova}, {@code iova + 4 KiB}, ...; every page must lie in a range of
     * {@link #dmaIovaTryAlloc} and be unlinked. EINVAL otherwise, or for a free frame.
     *
     * @since 1.5
     */
    void dmaIovaLink(long iova, long[] pfns, int n, DmaDirection dir);

    /**
     * {@code dma_iova_unlink} of {@code npages} linked pages from {@code iova}; waits for DMA in
     * flight, as {@link #dmaUnmap}. EINVAL for a page not linked.
     *
     * @since 1.5
     */
    void dmaIovaUnlink(long iova, int npages);

    /**
     * {@code dma_iova_free}: gives back a whole range of {@link #dmaIovaTryAlloc} ({@code iova},
     * {@code size} as allocated); EINVAL for anything else, EBUSY while a page is still linked.
     *
     * @since 1.5
     */
    void dmaIovaFree(long iova, long size);
}
