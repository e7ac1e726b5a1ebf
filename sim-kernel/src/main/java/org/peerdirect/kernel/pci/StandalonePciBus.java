package org.peerdirect.kernel.pci;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.pci.impl.PciBusCore;

/**
 * A PCI bus for a machine built without OSGi (a test kit machine, a benchmark rig): the same bus
 * as the published one (bus addresses, BARs, MSI-X, surprise removal, one IOMMU domain per
 * function attached at plug-in and detached at removal), but its functions are not published as
 * services: the builder hands each function to its driver's probe itself.
 */
public final class StandalonePciBus implements PciBus, AutoCloseable {

    private final PciBusCore core;
    /** Every warning given so far (see {@link #warnings}). */
    private final List<String> warnings = new CopyOnWriteArrayList<>();

    /** A bus that only keeps its warnings ({@link #warnings}). */
    public StandalonePciBus(Iommu iommu) {
        this(iommu, w -> {
        });
    }

    /**
     * @param iommu the IOMMU the functions' domains are created in
     * @param warn  receives the bus's warnings as they come, e.g. "its driver left 3 page(s)
     *              DMA-mapped at removal" (they are kept in {@link #warnings} too)
     */
    public StandalonePciBus(Iommu iommu, Consumer<String> warn) {
        this.core = new PciBusCore(new PciBusCore.Listener() {
            @Override
            public void added(PciFunction f) {
                // nothing is published: the builder probes the function itself
            }

            @Override
            public void removed(PciFunction f) {
                // nothing was published
            }
        }, w -> {
            warnings.add(w);
            warn.accept(w);
        }, iommu);
    }

    /**
     * The warnings the bus gave so far: a device model's BAR write handler that threw (a posted
     * write never reports to the driver, so this is where a model bug on the doorbell path shows),
     * a driver's DMA mappings left at removal, BAR memory not freed. A machine's audit requires none.
     */
    public List<String> warnings() {
        return List.copyOf(warnings);
    }

    @Override
    public PciFunction register(PciDeviceSpec spec) {
        return core.register(spec);
    }

    @Override
    public List<PciFunction> functions() {
        return core.functions();
    }

    /** Removes every function, last plugged first; their domains go with them. Idempotent. */
    @Override
    public void close() {
        core.close();
    }
}
