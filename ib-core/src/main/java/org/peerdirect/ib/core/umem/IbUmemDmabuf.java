package org.peerdirect.ib.core.umem;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.kernel.dmabuf.DmaBuf;

/**
 * {@code struct ib_umem_dmabuf}: [offset, offset+length) of a dma-buf, attached to the device.
 * Dynamic ({@link UmemService#umemDmabufGet}): mapped and unmapped under the buffer's reservation
 * lock as the driver needs it, the exporter's {@code move_notify} reaching the driver; or pinned
 * ({@link UmemService#umemDmabufGetPinned}): pinned and mapped once.
 *
 * <p>Lock rules: {@link #mapPages}, {@link #unmapPages} and {@link #revoke} need the reservation
 * lock ({@link #lock}); {@link #release} takes it itself.
 */
@ProviderType
public interface IbUmemDmabuf {

    /** Offset of the registered range in the buffer ({@code umem->address}). */
    long offset();

    long length();

    boolean writable();

    boolean pinned();

    DmaBuf dmabuf();

    /** {@code dma_resv_lock(dmabuf->resv)}. */
    void lock();

    void unlock();

    boolean isLockedByCurrentThread();

    /**
     * {@code ib_umem_dmabuf_map_pages}: maps the buffer for the device if it is not mapped (then
     * only re-checks), and keeps the part [ALIGN_DOWN(offset), ALIGN(offset+length)).
     *
     * @throws org.peerdirect.kernel.mm.KernelException EINVAL when revoked; ENODEV when the exporter revoked the buffer
     */
    void mapPages();

    /** {@code ib_umem_dmabuf_unmap_pages}: nothing when not mapped. */
    void unmapPages();

    boolean mapped();

    /** The DMA address of byte {@code off} of the registered range (page-aligned part plus the byte's page offset); mapped only. */
    long dmaAddressOf(long off);

    /** {@code ib_umem_dmabuf_revoke}: unmap, unpin; every later map is EINVAL. Reservation lock held. */
    void revoke();

    boolean revoked();

    /** {@code ib_umem_dmabuf_release}: revoke, detach, drop the buffer reference. Idempotent. */
    void release();
}
