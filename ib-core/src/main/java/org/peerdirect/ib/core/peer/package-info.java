/**
 * The Peer-Direct controller (private), MLNX OFED's {@code drivers/infiniband/core/peer_mem.c}
 * and {@code ib_peer_mem.h}: the client registry and its statistics
 * ({@link org.peerdirect.ib.core.peer.PeerMemoryController}, {@code ib_register_peer_memory_client},
 * {@code ib_peer_umem_get}), one registered client with its tickets and use count
 * ({@link org.peerdirect.ib.core.peer.PeerClient}, {@code struct ib_peer_memory_client}), the peer
 * umem ({@link org.peerdirect.ib.core.peer.PeerUmem}, {@code struct ib_umem_peer}) and its mapped
 * state's transitions ({@link org.peerdirect.ib.core.peer.MappedState}). The other umems
 * ({@code umem.c}, {@code umem_odp.c}, {@code umem_dmabuf.c}) are in
 * {@code org.peerdirect.ib.core.umem.impl}.
 */
package org.peerdirect.ib.core.peer;
