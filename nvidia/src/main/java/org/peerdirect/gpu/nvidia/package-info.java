/**
 * {@code nvidia.ko}'s resource manager as other kernel modules see it: one
 * {@link org.peerdirect.gpu.nvidia.NvidiaRm} per GPU, published as a service with
 * {@code gpu.index}, offering the CUDA driver calls (allocation, copies, dma-buf export) and the
 * nv-p2p interface ({@code nvidia_p2p_get_pages}, {@code put_pages}, {@code dma_map_pages}) that
 * nvidia-peermem builds on.
 */
@Export
@Version("0.3.0")
package org.peerdirect.gpu.nvidia;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
