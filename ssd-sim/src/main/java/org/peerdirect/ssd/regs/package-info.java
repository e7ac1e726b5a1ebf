/**
 * What an NVMe driver knows of the SSD besides the bytes behind its BARs: the controller
 * registers ({@link org.peerdirect.ssd.regs.NvmeRegs}, {@code include/linux/nvme.h}) and the
 * PMR window hand-off ({@link org.peerdirect.ssd.regs.PmrWindow}). Implemented by the model
 * ({@code ssd-sim}), used by {@code nvme.ko}'s bundle.
 */
@Export
@Version("0.1.0")
package org.peerdirect.ssd.regs;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
