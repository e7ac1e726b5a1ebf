package org.peerdirect.kernel.dmabuf;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.SgTable;

/**
 * The exporter's side ({@code struct dma_buf_ops}). Called by {@link DmaBuf} with the reservation
 * lock held where the kernel holds it ({@code pin}, {@code unpin}, {@code map_dma_buf},
 * {@code unmap_dma_buf}); {@code attach}, {@code detach} and {@code release} without it.
 */
@ConsumerType
public interface DmaBufOps {

    /** {@code attach}: may refuse an importer (e.g. one without peer-to-peer for device memory). */
    default void attach(DmaBufAttachment a) {
    }

    /** {@code detach}. */
    default void detach(DmaBufAttachment a) {
    }

    /** {@code pin}: the buffer may not move while pinned. */
    default void pin(DmaBufAttachment a) {
    }

    /** {@code unpin}. */
    default void unpin(DmaBufAttachment a) {
    }

    /**
     * {@code map_dma_buf}: the whole buffer mapped for {@code a.importer()} (its IOMMU domain):
     * page-aligned entries, {@link DmaBuf#size()} bytes in all.
     */
    SgTable map(DmaBufAttachment a, DmaDirection dir);

    /** {@code unmap_dma_buf}: undoes {@link #map}; must not fail. */
    void unmap(DmaBufAttachment a, SgTable sg, DmaDirection dir);

    /** {@code release}: the last reference to the buffer went (every fd closed, every attachment detached). */
    void release(DmaBuf buf);
}
