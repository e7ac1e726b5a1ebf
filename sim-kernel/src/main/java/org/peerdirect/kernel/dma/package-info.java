/**
 * The DMA API ({@code include/linux/dma-mapping.h}, {@code scatterlist.h}) that peer-memory
 * clients, the IB core and drivers share: a DMA device, its mapper, the direction, and the
 * DMA-mapped scatter table. Released API (1.x): peer-mem-api builds on it.
 */
@Export
@Version("1.7.0")
package org.peerdirect.kernel.dma;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
