package org.peerdirect.kernel.pci;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * A driver's interrupt handler for one MSI-X vector, the {@code irq_handler_t} given to
 * {@code request_irq}. It runs on the vector's own handler thread ({@code irq/<vector>-<bdf>}),
 * never on the device model's thread that raised the interrupt, and never concurrently with
 * itself.
 *
 * @see PciFunction#requestIrq(int, IrqHandler)
 */
@ConsumerType
@FunctionalInterface
public interface IrqHandler {

    /** Handles an interrupt on {@code vector}; an exception is logged and the handler stays requested. */
    void handle(int vector);
}
