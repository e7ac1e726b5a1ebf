/**
 * The simulated IOMMU ({@code drivers/iommu}, {@code kernel/dma}): one domain per device;
 * {@code dma_map_page} / {@code dma_map_sg} give I/O virtual addresses; device models reach
 * memory only through their domain's DMA API. A DMA through a missing or read-only mapping is an
 * IOMMU fault; a DMA whose frame was freed since it was mapped is a use-after-free. Both are
 * counted, reported to the device as {@link org.peerdirect.kernel.iommu.IommuFault}, and never
 * performed. {@link org.peerdirect.kernel.iommu.Iommu#audit()} is what every test ends with.
 */
@Export
@Version("0.1.0")
package org.peerdirect.kernel.iommu;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
