package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * {@code struct ib_xrcd}'s driver part ({@code alloc_xrcd} made it). The core keeps the use
 * count, the sharing by file and the order of teardown: it deallocates only a domain no XRC SRQ
 * or receive QP uses.
 *
 * @since 0.6
 */
@ConsumerType
public interface IbXrcdOps {
    /** {@code dealloc_xrcd}. */
    void deallocXrcd();
}
