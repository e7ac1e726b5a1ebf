/**
 * The ConnectX-4+ hardware interface as bytes ({@code mlx5_ifc.h} and {@code device.h}): the
 * big-endian initialization segment at the start of BAR0, the 64-byte command queue entry, the
 * 576-byte mailbox block, opcodes and status codes, the capability block, EQEs and EQ contexts,
 * firmware-page commands; the work-queue descriptors libmlx5 and {@code mlx5_ib} write (send WQE
 * segments and opcodes, {@link org.peerdirect.hca.cx4.ifc.Wqe}; UMR segments and their bits,
 * {@link org.peerdirect.hca.cx4.ifc.Umr}; CQEs, doorbell records), as {@code mlx5dv.h} and
 * {@code include/linux/mlx5/qp.h} define them; {@link org.peerdirect.hca.cx4.ifc.IfcField} reads
 * and writes a field as {@code MLX5_GET}/{@code MLX5_SET} do. Shared by the device model, the
 * driver and the user library, as the kernel's {@code mlx5_ifc.h} is: layouts and constants, no
 * behaviour.
 */
@Export
@Version("0.10.0")
package org.peerdirect.hca.cx4.ifc;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
