package org.peerdirect.ib.core.umem;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.kernel.dma.SgTable;

/**
 * {@code struct ib_umem}: a registered user range and its DMA mapping for one device.
 *
 * <h2>Life cycle for the driver</h2>
 * <pre>
 *   umem = umemService.umemGet(...)       pinned or peer; a peer umem of an invalidating client is
 *                                         fenced: invalidations wait
 *   read dmaBlocks(), build the MR
 *   umem.activateInvalidationNotifier(f)  after the last read of the blocks; f may run from now on
 *   ... DMA ...
 *   revoke the MR in the device
 *   umem.stopInvalidationNotifier()       f is never called after this returns
 *   umem.release()
 * </pre>
 * On a failed registration the driver calls {@code stopInvalidationNotifier()} (or directly
 * {@code release()}, which does it) without activating. For a pinned umem the notifier methods do
 * nothing: pinned memory is never invalidated.
 */
@ProviderType
public interface IbUmem {

    /** The user virtual address the registration starts at (unaligned). */
    long address();

    /** The registration's length in bytes. */
    long length();

    /** The process whose address space the range is in. */
    int pid();

    /** Whether the device may write ({@code ib_access_writable} of the access flags). */
    boolean writable();

    /** True for memory supplied by a peer client. */
    boolean isPeer();

    /** The peer client's name, or {@code null} for pinned memory. */
    String peerClientName();

    /** The peer ticket ({@code xa_id}) or {@code PeerMemoryRegistry.NO_INVALIDATION_ID}. */
    long ticket();

    /** {@code ib_umem_num_pages}: 4 KiB pages of the page-aligned range, charged to memlock. */
    long npages();

    /**
     * The DMA blocks covering exactly the 4 KiB-aligned user range, in order: the first block
     * starts at the DMA address of {@code address() & ~4095}. For a peer umem with pages larger
     * than 4 KiB the first and last blocks are trimmed (the client keeps its granules).
     */
    SgTable dmaBlocks();

    /**
     * The DMA address of user address {@code va} inside the range.
     *
     * @throws IllegalArgumentException {@code va} is outside [address, address+length)
     */
    long dmaAddressOf(long va);

    /**
     * How many contiguous bytes from {@code va} are in the same DMA block (at most up to the end
     * of the registration): a device splits a transfer at block boundaries.
     */
    long contiguousBytesAt(long va);

    /**
     * {@code ib_umem_activate_invalidation_notifier}: the driver is ready for {@code func}; lifts
     * the registration fence so invalidations run. Once per umem.
     *
     * @throws IllegalStateException already activated, or stopped, or released
     */
    void activateInvalidationNotifier(UmemInvalidateFunction func);

    /**
     * {@code ib_umem_stop_invalidation_notifier}: waits for an invalidation in progress, clears the
     * function, and unmaps the peer pages; the function is never called after this returns.
     *
     * @throws IllegalStateException already stopped or released
     */
    void stopInvalidationNotifier();

    /** Whether a peer client invalidated this umem (its memory is gone; only release remains). */
    boolean invalidated();

    /**
     * {@code ib_umem_release}: unmaps and unpins (or returns the pages to the peer client and
     * releases its context) and returns the memlock charge. Stops the notifier first if the
     * driver has not.
     *
     * @throws IllegalStateException released twice
     */
    void release();
}
