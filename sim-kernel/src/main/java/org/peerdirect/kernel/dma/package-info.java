/**
 * The DMA API ({@code include/linux/dma-mapping.h}, {@code scatterlist.h}) that peer-memory
 * clients, the IB core and drivers share: a DMA device, its mapper, the direction, and the
 * DMA-mapped scatter table. Released API: peer-mem-api builds on it.
 *
 * <p>2.0.0: {@code dma_map_resource} takes a {@link org.peerdirect.kernel.dma.DmaResource} (a
 * device's BAR as the DMA API names it) instead of the PCI function and BAR index, so this
 * released package depends on no unreleased one (the {@code arch} rules check it).
 */
@Export
@Version("2.0.0")
package org.peerdirect.kernel.dma;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
