/**
 * User memory for RDMA registrations ({@code include/rdma/ib_umem.h},
 * {@code drivers/infiniband/core/umem.c}): what a driver asks for when a user registers a range.
 * {@link org.peerdirect.ib.core.umem.UmemService#umemGet} pins host memory, or, when pinning
 * refuses the range (a device mapping) and the caller allows it, takes it from a peer-memory
 * client through the Peer-Direct controller. The driver reads the umem's DMA blocks, arms the
 * invalidation notifier once it can revoke the registration, stops it at deregistration, and
 * releases the umem.
 */
@Export
@Version("0.6.0")
package org.peerdirect.ib.core.umem;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
