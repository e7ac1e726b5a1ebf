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
 * <p>Fences ({@code dma_resv} fences) are not modelled: an exporter here moves its buffer
 * synchronously under the reservation lock, so an importer that takes the lock after a move sees
 * the buffer where it now is.
 */
@Export
@Version("0.1.0")
package org.peerdirect.kernel.dmabuf;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
