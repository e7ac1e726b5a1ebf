/**
 * dma-buf ({@code drivers/dma-buf/dma-buf.c}, {@code include/linux/dma-buf.h}): buffers one
 * device's driver exports and other devices import by file descriptor. The exporter implements
 * {@link org.peerdirect.kernel.dmabuf.DmaBufOps}; an importer attaches with
 * {@link org.peerdirect.kernel.dmabuf.DmaBufImporterOps} (dynamic: {@code move_notify} when the
 * exporter moves the buffer; or pinned, where the exporter may not move it), maps its attachment
 * into its own IOMMU domain under the buffer's reservation lock, and unmaps before the exporter
 * may move. Revocation ({@link org.peerdirect.kernel.dmabuf.DmaBuf#revoke}) is the exporter's
 * device going away: dynamic and revocable pinned importers let go, later maps fail.
 *
 * <p>Fences: an exporter that finishes a move after it released the reservation lock (the copy
 * of a migration) adds a kernel-usage fence ({@link org.peerdirect.kernel.dmabuf.DmaBuf#addFence})
 * and signals it when done; an importer waits for the fences after it maps
 * ({@link org.peerdirect.kernel.dmabuf.DmaBuf#waitFences}, bounded: ETIMEDOUT). Only kernel-usage
 * fences are modelled (no read/write/bookkeep usages, no fence callbacks).
 */
@Export
@Version("0.1.0")
package org.peerdirect.kernel.dmabuf;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
