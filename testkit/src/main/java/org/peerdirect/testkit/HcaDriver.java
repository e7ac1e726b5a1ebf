package org.peerdirect.testkit;

import java.util.function.Consumer;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.umem.UmemService;

/**
 * A driver for the machine's ConnectX-3 models: probes one PCI function as a driver's probe
 * function does ({@code pci_driver.probe}: the device's registers, interrupts and DMA mapping
 * calls are reached through the function only; its DMA-coherent pages come from the kernel's
 * page allocator), e.g.
 * {@code (i, fn, umems, mm) -> { Mlx4Device d = new Mlx4Device("mlx4_" + i, fn, mm, umems);
 * return new Probed(d, d::removeHardware); }}.
 */
@ConsumerType
@FunctionalInterface
public interface HcaDriver {

    /**
     * The driver's device, and how its hardware goes away (true: surprise removal, false: unbind).
     */
    record Probed(IbDeviceOps device, Consumer<Boolean> removeHardware) {
    }

    /**
     * Probes HCA {@code index}'s function (the driver names its device, e.g. {@code mlx4_<index>});
     * {@code mm} is the machine's kernel memory, where the driver's DMA pages come from.
     */
    Probed probe(int index, PciFunction fn, UmemService umems, org.peerdirect.kernel.mm.Mm mm);
}
