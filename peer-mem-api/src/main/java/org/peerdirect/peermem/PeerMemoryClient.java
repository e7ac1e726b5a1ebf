package org.peerdirect.peermem;

import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.dma.DmaDevice;
import org.osgi.annotation.versioning.ConsumerType;

/**
 * A peer-memory client ({@code struct peer_memory_client}): the seven callbacks through which
 * the IB core takes a device's memory for an RDMA registration.
 *
 * <h2>Call order for one registration</h2>
 * <pre>
 *   acquire                  (under the core's global client lock, clients in registration order)
 *   getPages(.., coreContext) the ticket to pass to {@link PeerMemoryRegistration#invalidate}
 *   dmaMap                   for the registering device
 *   getPageSize
 *   ... the driver uses the mapping; the client may invalidate at any time ...
 *   dmaUnmap, putPages       (by the core at deregistration or invalidation, see below)
 *   release
 * </pre>
 * Failures unwind exactly as {@code ib_peer_umem_get} does: {@code getPages} fails → the ticket
 * is dropped → {@code release}; {@code dmaMap} fails → {@code putPages} → {@code release}.
 *
 * <h2>Mandatory and optional callbacks</h2>
 * {@code acquire}, {@code getPages}, {@code dmaMap}, {@code dmaUnmap} and {@code putPages} are
 * mandatory, as {@code ib_memory_peer_check_mandatory} requires: their default implementations
 * stand for a NULL function pointer, and registering a client that does not override one of them
 * is refused with a message naming it. {@code getPageSize} (default {@link SgTable#PAGE_SIZE})
 * and {@code release} (default: nothing) are optional.
 *
 * <h2>Locking rules</h2>
 * {@code getPages} and {@code dmaMap} must not depend on a lock the client holds while calling
 * {@link PeerMemoryRegistration#invalidate}: an invalidation of a registration still being built
 * waits until the driver arms its notifier (the fence). The invalidation may itself call back
 * into {@code dmaUnmap} and {@code putPages}, or wait for another thread that does.
 *
 * <h2>Threads</h2>
 * Callbacks are called from the registering or deregistering thread, or from the thread that
 * calls {@code invalidate}; callbacks for different registrations run concurrently.
 */
@ConsumerType
public interface PeerMemoryClient {

    /** {@code IB_PEER_MEMORY_NAME_MAX - 1}: the longest name accepted. */
    int NAME_MAX = 63;
    /** {@code IB_PEER_MEMORY_VER_MAX - 1}: the longest version accepted. */
    int VERSION_MAX = 15;

    /**
     * {@code PEER_MEM_INVALIDATE_UNMAPS}: on invalidation the core does not call {@code dmaUnmap}
     * and {@code putPages}; the client unmaps after its call to {@code invalidate} returns. The
     * core may still call {@code dmaUnmap}/{@code putPages} for a registration the client already
     * unmapped, and {@code release} concurrently with an invalidation: such a client protects
     * itself against those races (hold its own lock around invalidate + its own unmap, and take
     * the same lock in {@code dmaUnmap}/{@code putPages}/{@code release}).
     */
    int INVALIDATE_UNMAPS = 1;

    /**
     * Service property of a whiteboard client ({@code Boolean}): {@code true} registers it with
     * an invalidation callback, as if {@code register(client, true)} were called. Absent means
     * {@code false}.
     */
    String INVALIDATION_PROPERTY = "peermem.invalidation";

    /** {@code name}: at most {@link #NAME_MAX} characters, no '/', unique among registered clients. */
    String name();

    /** {@code version}: at most {@link #VERSION_MAX} characters; shown in the statistics. */
    String version();

    /** Flavour flags: 0 or {@link #INVALIDATE_UNMAPS} (the kernel's {@code peer_memory_client_ex.flags}). */
    default int flags() {
        return 0;
    }

    /**
     * {@code acquire}: does this client own the whole virtual range [addr, addr+size) of the
     * process {@code pid}? Returns the client context for the later callbacks ("returns 1"), or
     * {@code null} when the range is not (wholly) the client's ("0 or -ERRNO"). If a context is
     * returned, {@link #release} will be called with it. Any internal error must be answered
     * with {@code null}; an exception thrown here is logged and treated as "not mine". Called
     * under the core's global peer-client lock: keep it short and never block on a registration.
     * Mandatory.
     */
    default Object acquire(int pid, long addr, long size) {
        throw new UnsupportedOperationException("acquire");
    }

    /**
     * {@code get_pages}: pin the pages of the raw, unaligned user range [addr, addr+size).
     * {@code write} is always true (it forces a CoW break); {@code force} is true for read-only
     * registrations ("CoW break required but don't fail on read-only areas"). {@code coreContext}
     * is the ticket to pass to {@link PeerMemoryRegistration#invalidate}, or
     * {@link PeerMemoryRegistry#NO_INVALIDATION_ID} for a client registered without invalidation;
     * the client may call invalidate with it as soon as this returns. After success
     * {@link #putPages} will be called; {@link #dmaMap} always follows. Throw to fail (a
     * {@code KernelException} keeps its errno). Mandatory.
     */
    default void getPages(long addr, long size, boolean write, boolean force, Object clientContext, long coreContext) {
        throw new UnsupportedOperationException("getPages");
    }

    /**
     * {@code dma_map}: map the pinned pages for {@code device} and return the DMA-mapped table.
     * Every entry's start and end must be aligned to at least {@link SgTable#PAGE_SIZE}
     * (multiples may be mixed), so the client expands the unaligned user range to whole pages;
     * the table must cover the page-aligned user range. On failure nothing stays mapped. After
     * success {@link #dmaUnmap} will be called. Mandatory.
     */
    default SgTable dmaMap(Object clientContext, DmaDevice device) {
        throw new UnsupportedOperationException("dmaMap");
    }

    /**
     * {@code dma_unmap}: undo {@link #dmaMap} of {@code sg} (the table {@code dmaMap} returned).
     * "Must return 0": must not fail. Mandatory.
     */
    default void dmaUnmap(SgTable sg, Object clientContext, DmaDevice device) {
        throw new UnsupportedOperationException("dmaUnmap");
    }

    /**
     * {@code put_pages}: unpin what {@link #getPages} pinned. {@code sg} is the table
     * {@link #dmaMap} returned, or {@link SgTable#EMPTY} when {@code dmaMap} failed. Mandatory.
     */
    default void putPages(SgTable sg, Object clientContext) {
        throw new UnsupportedOperationException("putPages");
    }

    /**
     * {@code get_page_size}: the client's page size in bytes, a power of two of at least
     * {@link SgTable#PAGE_SIZE}. Called after {@link #dmaMap}; when it is larger than 4 KiB the
     * core trims the first and last DMA entries so the registration covers exactly the
     * 4 KiB-aligned user range (the OFED 5.5+ behaviour), while the client keeps its granules.
     */
    default long getPageSize(Object clientContext) {
        return SgTable.PAGE_SIZE;
    }

    /**
     * {@code release}: undo {@link #acquire}. Every {@code getPages}/{@code dmaMap} of the context
     * has been undone when this is called (for {@link #INVALIDATE_UNMAPS} clients: by the core or
     * by the client itself). Optional.
     */
    default void release(Object clientContext) {
    }

    /**
     * Called by the core with the registration before the client is first brokered. A whiteboard
     * client keeps it to invalidate; a client that called {@link PeerMemoryRegistry#register} gets
     * the same object as the return value. Optional.
     */
    default void registered(PeerMemoryRegistration registration) {
    }
}
