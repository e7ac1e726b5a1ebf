package org.peerdirect.kernel.dma;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * A device that does DMA ({@code struct device *} of the DMA API): its name and the mapper its
 * DMA goes through. A peer-memory client maps its pages for an RDMA device with
 * {@code device.dma().dmaMapSg(...)}; the addresses it puts in the {@link SgTable} are then I/O
 * virtual addresses of that device.
 *
 * <p>Implemented by drivers (mlx4, mlx5, the test DMA device), used by peer-memory clients and the
 * IB core: a consumer type, so a method added here is a major change (since 1.7; it was marked as a
 * provider type, which let a minor version break every driver).
 */
@ConsumerType
public interface DmaDevice {

    /** The device name, e.g. {@code mlx4_0} or a test device's name. */
    String name();

    /** The DMA API for this device (its IOMMU domain). */
    DmaMapper dma();
}
