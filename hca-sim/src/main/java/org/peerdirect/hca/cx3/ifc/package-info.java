/**
 * The ConnectX-3 hardware interface as bytes, what {@code drivers/net/ethernet/mellanox/mlx4}
 * and rdma-core's {@code providers/mlx4} write and read: the HCR command registers in BAR0
 * ({@link org.peerdirect.hca.cx3.ifc.Hcr}), opcodes and command statuses
 * ({@link org.peerdirect.hca.cx3.ifc.Mlx4Cmd}), the mailbox layouts of the bring-up commands and
 * of the EQ, MPT, CQ, SRQ and QP contexts, EQEs, CQEs and WQE segments, and the UAR doorbells.
 * Shared by the device model and the driver, as the kernel's {@code mlx4} headers are: offsets and
 * constants, big-endian as the hardware keeps them; no behaviour.
 */
@Export
@Version("0.2.0")
package org.peerdirect.hca.cx3.ifc;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
