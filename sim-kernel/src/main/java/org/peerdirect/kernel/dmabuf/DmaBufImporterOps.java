package org.peerdirect.kernel.dmabuf;

import org.osgi.annotation.versioning.ConsumerType;

/** The importer's side of an attachment ({@code struct dma_buf_attach_ops}). */
@ConsumerType
public interface DmaBufImporterOps {

    /** {@code allow_peer2peer}: the importer can reach the exporter's device memory peer to peer. */
    boolean allowPeer2Peer();

    /**
     * {@code move_notify}, with the reservation lock held: the exporter is about to move the
     * buffer (or the buffer is being revoked); the importer stops using its mapping and unmaps it
     * ({@link DmaBufAttachment#unmap}) before returning. A pinned importer is never moved; it is
     * called only on revocation, and only when {@link #revocable()}.
     */
    void moveNotify(DmaBufAttachment a);

    /**
     * A pinned importer that can give its mapping up when the exporter revokes the buffer
     * ({@code ib_umem_dmabuf_get_pinned_revocable_and_lock}); default false.
     */
    default boolean revocable() {
        return false;
    }
}
