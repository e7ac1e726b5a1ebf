package org.peerdirect.kernel.pci;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * A device model's view of driver reads of one of its BARs, for registers whose read has an
 * effect: an NVMe controller's {@code PMRSTS}, whose read completes only once every posted write
 * to the persistent memory region is persistent ({@code PMRCAP.PMRWBM} bit 1), or a read-to-clear
 * status. Called synchronously on the driver's thread before the value is loaded from
 * {@link PciFunction#barMemory(int)}, so the handler may update the register first. A PCIe read is
 * non-posted: the driver's read waits for the handler, which must therefore be bounded.
 *
 * <p>An exception thrown here is logged by the bus and the read returns the register as it is.
 *
 * @since 0.6
 */
@ConsumerType
@FunctionalInterface
public interface BarReadHandler {

    /**
     * @param bar the BAR index (0..5)
     * @param offset byte offset of the read inside the BAR
     * @param width 4 or 8 bytes
     */
    void reading(int bar, long offset, int width);
}
