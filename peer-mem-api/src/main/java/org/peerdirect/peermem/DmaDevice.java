package org.peerdirect.peermem;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.kernel.iommu.IommuDomain;

/**
 * The device a client DMA-maps its pages for ({@code struct device *dma_device} of
 * {@code dma_map}): an RDMA device's DMA identity. Every DMA the device performs goes through
 * its IOMMU domain, so a client maps pages with {@code iommuDomain().dmaMapSg(...)} and the
 * addresses it returns in the {@link SgTable} are I/O virtual addresses of that domain.
 */
@ProviderType
public interface DmaDevice {

    /** The device name, e.g. {@code mlx4_0} or a test device's name. */
    String name();

    /** The IOMMU domain all of this device's DMA goes through. */
    IommuDomain iommuDomain();
}
