package org.peerdirect.kernel.dma;

import org.osgi.annotation.versioning.ProviderType;

/**
 * Memory behind another device's BAR as the DMA API names it for {@code dma_map_resource}: the
 * {@code phys_addr_t} a driver takes from {@code pci_resource_start(pdev, bar)}. A driver obtains
 * it from the device that owns the BAR (the PCI layer's {@code PciFunction.resource(bar)}) and
 * hands it, with an offset and a length, to the DMA mapper of the device that will reach it peer
 * to peer ({@link DmaMapper#dmaMapResource}). Opaque otherwise: this package knows nothing of
 * PCI, which is not released API.
 *
 * @since 2.0
 */
@ProviderType
public interface DmaResource {

    /** The owning device's name (a PCI function's bus address). */
    String owner();

    /** The BAR index on the owning device. */
    int bar();

    /** The BAR's size in bytes. */
    long size();
}
