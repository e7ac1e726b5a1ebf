package org.peerdirect.ib.core.impl;

import org.peerdirect.ib.core.peer.PeerMemoryController;

/**
 * The peer-memory controller as a service of this bundle (its package is private, so only ib-core's
 * own components see it): the umem service and the {@code peermem:} commands reference it by type
 * instead of finding the registry component by name and downcasting it.
 */
public interface PeerMemoryControllerService {

    /** The controller: brokering, tickets, invalidation, statistics. */
    PeerMemoryController controller();
}
