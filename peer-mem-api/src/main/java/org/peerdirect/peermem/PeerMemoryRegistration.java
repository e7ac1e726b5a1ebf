package org.peerdirect.peermem;

import java.time.Duration;

import org.osgi.annotation.versioning.ProviderType;

/** A registered client's handle ({@code reg_handle}). */
@ProviderType
public interface PeerMemoryRegistration {

    /** The client's name. */
    String name();

    /** Whether the client was registered with an invalidation callback. */
    boolean invalidationRequired();

    /**
     * The invalidation callback ({@code (*invalidate_callback)(reg_handle, core_context)}): the
     * registration whose {@code getPages} received {@code coreContext} must stop using the
     * memory. Blocks while that registration is still being built (until its driver arms the
     * notifier or the registration fails), then calls the driver's invalidate function, then
     * (unless the client is {@link PeerMemoryClient#INVALIDATE_UNMAPS}) {@code dmaUnmap} and
     * {@code putPages}. When this returns, no device DMA to the range happens any more. A stale
     * or unknown ticket is only counted ({@code num_free_callbacks}). Always "returns 0".
     *
     * @throws IllegalStateException the client was registered without invalidation, or has
     *                               completed {@link #unregister}
     */
    void invalidate(long coreContext);

    /**
     * {@code ib_unregister_peer_memory_client}: removes the client from brokering at once, then
     * waits, without bound, until every registration that uses it has been deregistered by its
     * owner. Once this returns no callback of the client is ever called again. Live registrations
     * are not invalidated by the core; a client that wants to leave sooner invalidates them
     * first. While it waits, a line naming the registrations still holding the client is logged
     * at intervals. Calling it again after it returned does nothing.
     */
    void unregister();

    /**
     * Like {@link #unregister()} but gives up after {@code timeout}; the client stays removed from
     * brokering either way.
     *
     * @return true when unregistration completed, false when registrations still hold the client
     */
    boolean unregister(Duration timeout) throws InterruptedException;

    /** A snapshot of the client's statistics. */
    PeerMemoryStatistics statistics();
}
