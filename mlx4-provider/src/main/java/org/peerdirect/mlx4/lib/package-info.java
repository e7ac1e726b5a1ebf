/**
 * libmlx4's part in the user's process ({@code providers/mlx4}: {@code qp.c}, {@code srq.c},
 * {@code buf.c}, {@code doorbell.h}): queue buffers in the process's memory, send WQEs with the
 * owner bit, receive and SRQ WQEs, the receive doorbell records, the UAR's send doorbell and
 * BlueFlame. It reaches the device only through the UAR and BlueFlame pages of its context (MMIO
 * on the PCI function) and the bytes the device fetches by DMA; never the kernel side of its
 * driver. Private to the bundle.
 */
package org.peerdirect.mlx4.lib;
