package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_pd}. */
@ProviderType
public interface IbvPd {

    /** {@code IBV_ADVISE_MR_ADVICE_PREFETCH}: make the range present for the device, read-only. */
    int ADVISE_MR_ADVICE_PREFETCH = 0;
    /** {@code IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE}: present and writable (EPERM on an MR without local write). */
    int ADVISE_MR_ADVICE_PREFETCH_WRITE = 1;
    /** {@code IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT}: only the pages already present for the CPU; nothing is faulted in. */
    int ADVISE_MR_ADVICE_PREFETCH_NO_FAULT = 2;
    /** {@code IB_UVERBS_ADVISE_MR_FLAG_FLUSH}: synchronous; the translations are in the device when the call returns. */
    int ADVISE_MR_FLAG_FLUSH = 1;

    IbvContext context();

    /**
     * {@code ibv_reg_mr} of [addr, addr+length) of the context's process with {@code IbAccess}
     * flags. Pinned memory, or peer memory when pinning refuses the range and a peer client claims
     * it. Remote write or atomic without local write is EINVAL; {@code ON_DEMAND} on a device
     * without ODP is EOPNOTSUPP.
     */
    IbvMr regMr(long addr, long length, int access);

    /**
     * {@code ibv_reg_dmabuf_mr}: [offset, offset+length) of the dma-buf open under {@code fd} in
     * the context's process, seen through the keys at {@code iova}. {@code iova} must have the same
     * page offset as {@code offset}; {@code access} is limited to local write, remote write, remote
     * read, remote atomic and relaxed ordering (remote write or atomic need local write).
     *
     * @throws org.peerdirect.kernel.mm.KernelException EINVAL for those, an empty or overflowing
     *         range or one past the buffer's end; EBADF when {@code fd} is not a dma-buf; EOPNOTSUPP
     *         when the driver has no {@code reg_user_mr_dmabuf} (mlx4)
     * @since 0.6
     */
    IbvMr regDmabufMr(long offset, long length, long iova, int fd, int access);

    /**
     * {@code ibv_reg_mr_ex}: the registration {@code attr} describes, with the checks of
     * libibverbs' {@code ibv_cmd_reg_mr_ex} and the kernel's {@code UVERBS_METHOD_REG_MR}. A
     * dma-buf ({@code FD}) needs {@code FD_OFFSET} and {@code IOVA} and no {@code ADDR}, then is
     * {@link #regDmabufMr}; an address needs {@code ADDR} and no {@code FD_OFFSET}, its iova
     * (default the address) with the address's page offset, then is {@link #regMr} (ODP and
     * implicit ODP included; implicit needs address 0), seen through its keys at the iova
     * ({@code ibv_reg_mr_iova}). The MR's {@link IbvMr#addr()} is the address, or for a dma-buf
     * the iova (as {@link #regDmabufMr}).
     *
     * @throws org.peerdirect.kernel.mm.KernelException EINVAL for a null attr, unknown
     *         {@code comp_mask} bits, a combination of fields that do not go together or a
     *         missing one, page offsets that differ, and whatever {@link #regMr} or
     *         {@link #regDmabufMr} refuse; EOPNOTSUPP for a DMA handle (none here), an iova other
     *         than the address on a driver that maps an MR at its address only (mlx4 here; mlx5
     *         for on-demand MRs), a dma-buf on a driver without {@code reg_user_mr_dmabuf}
     * @since 0.12
     */
    IbvMr regMrEx(IbvMrInitAttr attr);

    /**
     * {@code ibv_advise_mr}: prefetch the ranges of {@code sgList} (each an ODP MR's lkey and a range
     * in it) into the device's translation. With {@link #ADVISE_MR_FLAG_FLUSH} the work is done
     * before the call returns and its errors are thrown (EFAULT for a range outside its MR or not
     * mappable); without it the keys are checked now and the work runs in the background, best
     * effort (its failures are silent, as the kernel's). No SGE: nothing to do.
     *
     * @throws org.peerdirect.kernel.mm.KernelException EINVAL unknown flags; EOPNOTSUPP a driver
     *         without {@code advise_mr} or an unknown advice; ENOENT an lkey that names no ODP MR (mlx5 also prefetches
     *         its dynamic dma-buf MRs, mapping the whole buffer);
     *         EPERM an MR of another PD, or PREFETCH_WRITE on an MR without local write
     */
    void adviseMr(int advice, int flags, IbvSge... sgList);

    /** {@code ibv_create_qp}. */
    IbvQp createQp(IbvQpInitAttr attr);

    /** {@code ibv_create_srq}. */
    IbvSrq createSrq(int maxWr, int maxSge);

    /** {@code ibv_create_ah}: an address handle to port {@code portNum}'s peer with LID {@code dlid} (no GRH). */
    IbvAh createAh(int dlid, int portNum);

    /**
     * {@code ibv_create_ah} with a full {@code ibv_ah_attr}: a GRH to a GID where {@code isGlobal}
     * (required on a RoCE port).
     *
     * @throws org.peerdirect.kernel.mm.KernelException EINVAL a RoCE port without a GRH, a source
     *         GID index outside the port's table, a hop limit outside 0..255, a GID not 16 bytes,
     *         an InfiniBand address without a unicast LID
     * @since 0.8
     */
    IbvAh createAh(IbvAhAttr attr);

    /** {@code ibv_dealloc_pd}: EBUSY while objects use it; idempotent. */
    void dealloc();
}
