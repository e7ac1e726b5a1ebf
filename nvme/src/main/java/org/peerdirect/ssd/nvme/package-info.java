/**
 * {@code nvme.ko}'s persistent-memory-region part as other kernel modules see it: one
 * {@link org.peerdirect.ssd.nvme.NvmePmr} per controller, published as a service with
 * {@code ssd.index}, offering user mappings of PMR ranges, peer pins mapped for another device
 * ({@code pci_p2pdma}'s shape), the write barrier and dma-buf export that {@code ssd_peer_mem}
 * builds on.
 */
@Export
@Version("0.2.0")
package org.peerdirect.ssd.nvme;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
