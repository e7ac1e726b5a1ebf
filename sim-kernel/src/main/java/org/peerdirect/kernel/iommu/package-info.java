/**
 * The simulated IOMMU ({@code drivers/iommu}, {@code kernel/dma}): one domain per device;
 * {@code dma_map_page} / {@code dma_map_sg} give I/O virtual addresses; device models reach
 * memory only through their domain's DMA API. A DMA through a missing or read-only mapping is an
 * IOMMU fault; a DMA whose frame was freed since it was mapped is a use-after-free. Both are
 * counted, reported to the device as {@link org.peerdirect.kernel.iommu.IommuFault}, and never
 * performed. {@link org.peerdirect.kernel.iommu.Iommu#audit()} is what every test ends with.
 * {@code dma_map_resource} ({@link org.peerdirect.kernel.iommu.IommuDomain#dmaMapResource}) maps a
 * range of another PCI function's BAR, so one device's DMA reaches another's memory peer to peer
 * (GPUDirect RDMA); a DMA after the function was removed is a use-after-free.
 */
@Export
@Version("0.5.0")
package org.peerdirect.kernel.iommu;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
