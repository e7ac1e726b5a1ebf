/**
 * DMA-coherent memory for drivers ({@code dma_alloc_coherent}): kernel pages mapped for one
 * device, freed together when the driver goes. Not released (it speaks the simulated kernel's
 * {@code Mm}, 0.x), so apart from the released DMA API {@code org.peerdirect.kernel.dma}.
 */
@Export
@Version("0.2.0")
package org.peerdirect.kernel.dma.coherent;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
