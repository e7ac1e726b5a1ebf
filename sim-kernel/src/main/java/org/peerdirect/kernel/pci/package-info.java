/**
 * The simulated PCI bus ({@code drivers/pci}): device models register PCI functions with BARs
 * and MSI-X vectors, drivers bind to the published {@link org.peerdirect.kernel.pci.PciFunction}
 * services by vendor and device id, and a device model's bundle stopping is a surprise hot-unplug
 * that its driver detects the real way, by reading all ones.
 */
@Export
@Version("0.13.0")
package org.peerdirect.kernel.pci;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
