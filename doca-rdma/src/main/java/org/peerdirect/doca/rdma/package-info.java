/**
 * DOCA RDMA ({@code libdoca_rdma}: {@code doca_rdma.h}) with its data path on the DPA
 * ({@code doca_ctx_set_datapath_on_dpa}): {@link org.peerdirect.doca.rdma.DocaRdma} makes RC
 * connections whose queues live in the DPA heap of a DOCA DPA context (DevX QPs through FlexIO),
 * exchanges connection details between two sides ({@code doca_rdma_export}/{@code doca_rdma_connect}),
 * reports completions to an attached DOCA DPA completion context, and hands DPA code its handle for
 * {@code doca_dpa_dev_rdma_post_*} ({@link org.peerdirect.doca.dpa.dev.DocaDpaDevRdma}).
 *
 * <p>What is absent: a host data path (DOCA RDMA tasks on a progress engine), connection managers
 * (RDMA CM), DC transport, {@code doca_buf} posts, RDMA READ and atomics as posts.
 */
@Export
@Version("0.1.0")
package org.peerdirect.doca.rdma;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
