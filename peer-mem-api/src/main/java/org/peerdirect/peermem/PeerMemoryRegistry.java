package org.peerdirect.peermem;

import org.osgi.annotation.versioning.ProviderType;

/**
 * The IB core's peer-memory client registry ({@code ib_register_peer_memory_client}), published
 * as an OSGi service by ib-core.
 */
@ProviderType
public interface PeerMemoryRegistry {

    /**
     * {@code PEER_NO_INVALIDATION_ID} (U32_MAX): the core context passed to {@code getPages} of a
     * client registered without invalidation. Tickets of invalidating clients are in
     * [0, NO_INVALIDATION_ID), allocated cyclically.
     */
    long NO_INVALIDATION_ID = 0xFFFF_FFFFL;

    /**
     * Registers a client; it is brokered from now on, after the clients registered before it.
     *
     * @param client       the client; its mandatory callbacks must be implemented
     * @param invalidation {@code true} to receive an invalidation callback (the kernel's non-NULL
     *                     {@code invalidate_callback}): the client is then "invalidation
     *                     required" and only callers that support invalidation get its memory
     * @return the registration handle ({@code reg_handle})
     * @throws IllegalArgumentException a mandatory callback is missing (named in the message), the
     *                                  name or version is too long or malformed, or a client of
     *                                  that name is already registered
     */
    PeerMemoryRegistration register(PeerMemoryClient client, boolean invalidation);
}
