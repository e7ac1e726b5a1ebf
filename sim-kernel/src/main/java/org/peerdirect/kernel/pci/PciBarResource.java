package org.peerdirect.kernel.pci;

import java.util.Objects;

import org.peerdirect.kernel.dma.DmaResource;

/**
 * BAR {@code bar} of {@code function} as a DMA resource ({@code pci_resource_start(pdev, bar)}):
 * what {@link PciFunction#resource} gives a driver to hand to another device's
 * {@link org.peerdirect.kernel.dma.DmaMapper#dmaMapResource}, which resolves the BAR (its memory
 * or aperture, its size, whether the function is still present) when it maps.
 *
 * @param function the function that owns the BAR
 * @param bar      the BAR index
 * @since 0.12
 */
public record PciBarResource(PciFunction function, int bar) implements DmaResource {

    public PciBarResource {
        Objects.requireNonNull(function, "function");
    }

    @Override
    public String owner() {
        return function.bdf();
    }

    @Override
    public long size() {
        return function.barSize(bar);
    }
}
