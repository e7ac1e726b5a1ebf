/**
 * The Peer-Direct peer-memory client API ({@code include/rdma/peer_mem.h}): how a device that
 * owns memory (a GPU, an accelerator, an SSD memory window) lets RDMA devices register it.
 *
 * <p>A client implements {@link org.peerdirect.peermem.PeerMemoryClient} and either registers
 * it with the {@link org.peerdirect.peermem.PeerMemoryRegistry} service (as a kernel module
 * calls {@code ib_register_peer_memory_client} from its init function) or publishes it as an
 * OSGi service (the whiteboard: the IB core registers it when it appears and unregisters it
 * when it goes). The IB core then brokers: when a driver registers a user range that
 * {@code pin_user_pages} refuses, clients are asked in registration order, the first whose
 * {@code acquire} claims the whole range supplies the pages, and the client may later revoke
 * them with {@link org.peerdirect.peermem.PeerMemoryRegistration#invalidate}.
 *
 * <p>The contract follows the OFED 5.1+ design (the 2020 rewrite): per-registration tickets
 * are integer ids, an invalidation that races a registration waits for the driver to arm its
 * notifier, and {@link org.peerdirect.peermem.PeerMemoryRegistration#unregister} returns only
 * when no registration uses the client. Baselined from 1.0.0: a change that breaks clients
 * needs a major version.
 *
 * <p>2.0.0: the scatter table, the DMA device and the direction are the kernel's DMA API
 * ({@code org.peerdirect.kernel.dma} 1.x) instead of types of this package, and a client maps
 * with {@code device.dma()} instead of {@code device.iommuDomain()}: this API depends on no 0.x
 * package any more.
 *
 * <p>3.0.0: {@code PeerMemoryAllocator} (tools' allocations of device memory, which speak the
 * unreleased {@code org.peerdirect.kernel.mm}) moved to {@code org.peerdirect.peermem.alloc} 0.x,
 * so this package references nothing unreleased: the build's house rules check it.
 */
@Export
@Version("3.0.0")
package org.peerdirect.peermem;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
