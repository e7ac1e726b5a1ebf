package org.peerdirect.kernel.pci;

import java.util.List;

import org.osgi.annotation.versioning.ProviderType;

/**
 * The PCI bus. Device models {@link #register} their functions; the bus assigns each a bus
 * address and publishes it as a {@link PciFunction} service that drivers bind to.
 *
 * <p>The service is bundle-scoped: every bundle gets its own view, and when a bundle releases it
 * (its bundle stops) every function that bundle registered is removed as by
 * {@link PciFunction#remove()} — a surprise hot-unplug of the device model's devices.
 */
@ProviderType
public interface PciBus {

    /**
     * Plugs in a function: assigns the next bus address ({@code 0000:03:00.0}, {@code 0000:04:00.0}, ...
     * one bus per function, as a machine's PCIe slots sit each behind its own root port), allocates
     * its BARs (zero-filled), and publishes it.
     *
     * @throws IllegalStateException when the bus, or this bundle's view of it, is gone
     * @see "pci_scan_single_device() in drivers/pci/probe.c"
     */
    PciFunction register(PciDeviceSpec spec);

    /** The functions present on the bus, by bus address. */
    List<PciFunction> functions();
}
