package org.peerdirect.ib.core.umem.impl;

import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;

/**
 * {@code ib_peer_umem_get} as {@code umem.c}'s {@code __ib_umem_get} calls it when pinning refused
 * the range ({@code drivers/infiniband/core/ib_peer_mem.h}); the Peer-Direct controller
 * ({@code org.peerdirect.ib.core.peer.PeerMemoryController}, {@code peer_mem.c}) implements it.
 * An interface so that the umem implementation does not depend on the peer package, which
 * builds on it ({@code struct ib_umem_peer} embeds a {@link Umem}).
 */
public interface PeerUmemGet {

    /**
     * Builds a peer umem, or rethrows {@code pinError} when no client claims the range. The
     * caller has charged the range's pages to the process's memlock limit; the umem's release
     * returns the charge, a failure leaves it to the caller.
     */
    IbUmem peerUmemGetAndLock(AddressSpace mm, DmaDevice device, long addr, long length, boolean writable,
            int peerMemFlags, KernelException pinError);

    /** Each client's answer to {@code acquire} for the range, released at once (see {@code UmemService#peerClaims}). */
    java.util.List<org.peerdirect.ib.core.umem.PeerClaim> peerClaims(int pid, long addr, long length, int peerMemFlags);
}
