/**
 * The umem implementations (private): what {@link org.peerdirect.ib.core.umem.UmemService} hands
 * a driver. A reader holding the kernel's {@code drivers/infiniband/core} finds:
 *
 * <table>
 * <caption>drivers/infiniband/core and this package</caption>
 * <tr><th>kernel</th><th>here</th></tr>
 * <tr><td>{@code umem.c}: {@code ib_umem_get}, {@code __ib_umem_get}'s checks and its fall-back to
 * {@code ib_peer_umem_get}</td><td>{@link org.peerdirect.ib.core.umem.impl.UmemCore} (every entry
 * point of the three files), {@link org.peerdirect.ib.core.umem.impl.PeerUmemGet}</td></tr>
 * <tr><td>{@code umem.c}: {@code struct ib_umem}, {@code ib_umem_num_pages}</td><td>{@link org.peerdirect.ib.core.umem.impl.Umem}</td></tr>
 * <tr><td>{@code umem.c}: the pinned pages of {@code __ib_umem_get}, {@code ib_umem_release}</td><td>{@link org.peerdirect.ib.core.umem.impl.UmemPinned}</td></tr>
 * <tr><td>{@code umem_odp.c}</td><td>{@link org.peerdirect.ib.core.umem.impl.UmemOdp}</td></tr>
 * <tr><td>{@code umem_dmabuf.c}</td><td>{@link org.peerdirect.ib.core.umem.impl.UmemDmabuf}</td></tr>
 * </table>
 *
 * The peer umem ({@code struct ib_umem_peer}) and the Peer-Direct controller ({@code peer_mem.c})
 * live in {@code org.peerdirect.ib.core.peer}, which builds on this package; this package does
 * not depend on it (the peer path is reached through {@link org.peerdirect.ib.core.umem.impl.PeerUmemGet}).
 */
package org.peerdirect.ib.core.umem.impl;
