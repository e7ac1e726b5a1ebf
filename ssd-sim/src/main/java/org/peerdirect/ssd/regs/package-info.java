/**
 * What an NVMe driver knows of the SSD: the controller registers
 * ({@link org.peerdirect.ssd.regs.NvmeRegs}) and the admin queue's descriptors
 * ({@link org.peerdirect.ssd.regs.NvmeCommand}), both {@code include/linux/nvme.h}. The layouts
 * the model implements and {@code nvme.ko}'s bundle programs; nothing else passes between them.
 */
@Export
@Version("0.2.0")
package org.peerdirect.ssd.regs;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
