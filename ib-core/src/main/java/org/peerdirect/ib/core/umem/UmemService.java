package org.peerdirect.ib.core.umem;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.dma.DmaDevice;

/** {@code ib_umem_get} / {@code ib_umem_get_peer}, published by ib-core. */
@ProviderType
public interface UmemService {

    /** {@code IB_PEER_MEM_ALLOW}: the range may be peer memory. */
    int IB_PEER_MEM_ALLOW = 1;
    /** {@code IB_PEER_MEM_INVAL_SUPP}: the caller supports invalidation (arms the notifier). */
    int IB_PEER_MEM_INVAL_SUPP = 1 << 1;

    /**
     * Registers [addr, addr+length) of {@code mm} for DMA by {@code device}.
     *
     * <p>First the pinned path: the range's pages are charged to memlock, pinned and DMA-mapped.
     * When pinning refuses (for instance a device mapping, {@code VM_IO|VM_PFNMAP}) and
     * {@code peerMemFlags} has {@link #IB_PEER_MEM_ALLOW}, peer clients are asked in registration
     * order; those that require invalidation are skipped unless {@link #IB_PEER_MEM_INVAL_SUPP}
     * is set. The first whose {@code acquire} claims the whole range supplies the pages; the
     * memlock charge is kept for the peer umem. If no client claims it, the pinning error is
     * thrown.
     *
     * @throws KernelException EINVAL for a bad range or unknown access flag, ENOMEM over the
     *                         memlock limit, EFAULT when the range is neither pinnable nor claimed,
     *                         or the peer client's error (its callback named in the message)
     */
    IbUmem umemGet(AddressSpace mm, DmaDevice device, long addr, long length, int access, int peerMemFlags);

    /**
     * {@code ib_umem_odp_get}: an on-demand-paging umem over [addr, addr+length) of {@code mm} for
     * {@code device}. Nothing is pinned, mapped or charged to memlock; an interval notifier over
     * the page-aligned range calls {@code ops} on every invalidation. {@code IB_ACCESS_HUGETLB}
     * makes the granule 2 MiB (the range is aligned to it).
     *
     * @throws KernelException EINVAL without {@code IB_ACCESS_ON_DEMAND}, an unknown access flag,
     *                         an empty range or no ops; EOVERFLOW when the aligned range wraps;
     *                         EFAULT when the process has exited
     */
    IbUmemOdp umemOdpGet(AddressSpace mm, DmaDevice device, long addr, long length, int access, UmemOdpInvalidate ops);

    /**
     * {@code ib_umem_odp_alloc_implicit}: the umem of an implicit ODP MR (the whole address space):
     * no range, no list, no notifier; children are made with {@link IbUmemOdp#allocChild}.
     *
     * @throws KernelException EINVAL with {@code IB_ACCESS_HUGETLB} or without
     *                         {@code IB_ACCESS_ON_DEMAND}
     */
    IbUmemOdp umemOdpAllocImplicit(AddressSpace mm, DmaDevice device, int access);

    /**
     * {@code ib_umem_dmabuf_get}: a dynamic import of [offset, offset+size) of the dma-buf open
     * under {@code fd} in {@code mm}, attached for {@code device} with {@code allow_peer2peer} and
     * the driver's {@code move_notify}; nothing mapped yet.
     *
     * @throws org.peerdirect.kernel.mm.KernelException EINVAL on an overflowing or empty range, a
     *         range past the buffer's end, or no {@code moveNotify}; EBADF when {@code fd} is not a dma-buf
     * @since 0.4
     */
    IbUmemDmabuf umemDmabufGet(AddressSpace mm, DmaDevice device, long offset, long size, int fd, int access,
            java.util.function.Consumer<IbUmemDmabuf> moveNotify);

    /**
     * {@code ib_umem_dmabuf_get_pinned}: pinned and mapped once; the exporter may not move it.
     * With {@code revoke} non-null the import is revocable ({@code ib_umem_dmabuf_get_pinned_revocable_and_lock}):
     * when the exporter's device goes, {@code revoke} runs (reservation lock held) and must stop
     * the device's use of the mapping; the core then unmaps and unpins.
     *
     * @since 0.4
     */
    IbUmemDmabuf umemDmabufGetPinned(AddressSpace mm, DmaDevice device, long offset, long size, int fd, int access,
            java.util.function.Consumer<IbUmemDmabuf> revoke);

    /**
     * The peer path's question without the registration ({@code ib_get_peer_client} asking every
     * client, not stopping at the first): each registered client in registration order, with its
     * answer to {@code acquire} for [addr, addr+length) of {@code mm}; a client that claims is
     * released at once. A client that requires invalidation is {@link PeerClaim.Answer#SKIPPED}
     * unless {@code peerMemFlags} has {@link #IB_PEER_MEM_INVAL_SUPP}. Nothing is pinned, mapped,
     * charged or counted in the clients' statistics: a diagnosis ({@code rdma:doctor}) asks this.
     *
     * @since 0.6
     */
    java.util.List<PeerClaim> peerClaims(AddressSpace mm, long addr, long length, int peerMemFlags);
}
