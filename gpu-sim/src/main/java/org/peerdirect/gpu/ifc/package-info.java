/**
 * The GPU model's hardware interface as bytes, shared by the model ({@code gpu-sim}) and its
 * driver ({@code nvidia}) as {@code mlx5_ifc.h} is shared by firmware and {@code mlx5_core}:
 * layouts and constants, no behaviour.
 * <ul>
 * <li>{@link org.peerdirect.gpu.ifc.GpuRegs}: BAR0 ({@code NV_PMC_BOOT_0}, NVIDIA's) and the
 * model's own register block that sets up its queues; the model's own CPU window (BAR2);</li>
 * <li>{@link org.peerdirect.gpu.ifc.GspMsgq}: the command and message queues in memory the
 * driver allocates, in the shape of NVIDIA's GSP message queues ({@code msgqTxHeader},
 * {@code msgqRxHeader}, the queue element and the RPC header of {@code open-gpu-kernel-modules}
 * and nouveau's {@code r535} code);</li>
 * <li>{@link org.peerdirect.gpu.ifc.GpuRpc}: the model's own function numbers, parameters and
 * result codes carried in those RPC headers (not NVIDIA's: the real GSP's functions are RM object
 * allocations and controls this model does not implement).</li>
 * </ul>
 */
@Export
@Version("0.1.0")
package org.peerdirect.gpu.ifc;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
