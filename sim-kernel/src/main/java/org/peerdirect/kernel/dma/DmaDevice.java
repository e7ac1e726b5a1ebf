package org.peerdirect.kernel.dma;

import org.osgi.annotation.versioning.ProviderType;

/**
 * A device that does DMA ({@code struct device *} of the DMA API): its name and the mapper its
 * DMA goes through. A peer-memory client maps its pages for an RDMA device with
 * {@code device.dma().dmaMapSg(...)}; the addresses it puts in the {@link SgTable} are then I/O
 * virtual addresses of that device.
 */
@ProviderType
public interface DmaDevice {

    /** The device name, e.g. {@code mlx4_0} or a test device's name. */
    String name();

    /** The DMA API for this device (its IOMMU domain). */
    DmaMapper dma();
}
