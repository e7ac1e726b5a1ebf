/**
 * FlexIO's host library ({@code libflexio}, {@code flexio.h}): DPA applications, processes, event
 * handlers, queues, windows, outboxes, message streams and the command queue of a BlueField-3's
 * DPA, driven from the user's process over DevX ({@code org.peerdirect.mlx5.dv.Mlx5dv}). Java names
 * map one to one to the C names ({@code flexio_process_create} → {@link org.peerdirect.flexio.FlexioProcess#create},
 * {@code flexio_buf_dev_alloc} → {@code bufDevAlloc}, ...).
 *
 * <p>Errors: a call the C library answers with {@code flexio_status} FAILED or TIMEOUT throws
 * {@link org.peerdirect.flexio.FlexioException} carrying that status and a message naming the
 * cause (the refused command and its syndrome, the process's {@code dpa_process_status}, the
 * timeout); calls whose C form reports failure in their result keep it: {@code bufDevAlloc} returns
 * daddr 0 when the heap has no room, {@code bufDevFree} returns {@link org.peerdirect.flexio.FlexioStatus#FAILED}
 * for an address that is no block. Packing errors (argument count or type) are
 * {@link java.lang.IllegalArgumentException}s of the app's pack function.
 *
 * <p>What NVIDIA does not publish is the model's ([model], DPA_MODEL.md §2.5), built from the
 * silicon's primitives only: image loading and {@code host2dev_memcpy} by RDMA WRITE of an internal
 * loopback RC QP through DUMEM mkeys; RPC on a per-entry RPC thread whose result the RTOS keeps in
 * the thread's context; message streams as rings in host memory written through a window; a
 * host-driven command queue.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">FlexIO SDK</a>
 */
@Export
@Version("0.1.0")
package org.peerdirect.flexio;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
