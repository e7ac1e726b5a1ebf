package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_mr_init_attr} of {@link IbvPd#regMrEx}: what to register, the fields that
 * apply named by {@link #compMask} ({@code enum ibv_mr_init_attr_mask}, same values). Exactly one
 * of an address ({@link #REG_MR_MASK_ADDR}: {@link #addr}, {@link #length}; implicit ODP with
 * address 0, length -1 and {@code ON_DEMAND}) or a dma-buf ({@link #REG_MR_MASK_FD} with
 * {@link #REG_MR_MASK_FD_OFFSET} and {@link #REG_MR_MASK_IOVA}: {@link #fd},
 * {@link #fdOffset}, {@link #iova}). Mutable; {@link IbvPd#regMrEx} reads it once.
 *
 * @since 0.12
 */
public final class IbvMrInitAttr {
    /** {@code IBV_REG_MR_MASK_IOVA}: {@link #iova} is the MR's address as its keys see it (default: {@link #addr}). */
    public static final long REG_MR_MASK_IOVA = 1;
    /** {@code IBV_REG_MR_MASK_ADDR}: {@link #addr} in the process's address space. */
    public static final long REG_MR_MASK_ADDR = 1 << 1;
    /** {@code IBV_REG_MR_MASK_FD}: {@link #fd}, a dma-buf descriptor of the process. */
    public static final long REG_MR_MASK_FD = 1 << 2;
    /** {@code IBV_REG_MR_MASK_FD_OFFSET}: {@link #fdOffset} in that dma-buf. */
    public static final long REG_MR_MASK_FD_OFFSET = 1 << 3;
    /**
     * {@code IBV_REG_MR_MASK_DMAH}: a DMA handle ({@code ibv_alloc_dmah}, TPH steering hints).
     * This stack has no DMA handles: a request naming one is EOPNOTSUPP.
     */
    public static final long REG_MR_MASK_DMAH = 1 << 4;

    public long length;
    /** {@code IbAccess} flags. */
    public int access;
    public long compMask;
    public long iova;
    public long addr;
    public int fd = -1;
    public long fdOffset;

    /** An address-based registration of [addr, addr+length). */
    public static IbvMrInitAttr addr(long addr, long length, int access) {
        IbvMrInitAttr a = new IbvMrInitAttr();
        a.compMask = REG_MR_MASK_ADDR;
        a.addr = addr;
        a.length = length;
        a.access = access;
        return a;
    }

    /** A dma-buf registration of [fdOffset, fdOffset+length) of {@code fd}, seen at {@code iova}. */
    public static IbvMrInitAttr dmabuf(int fd, long fdOffset, long length, long iova, int access) {
        IbvMrInitAttr a = new IbvMrInitAttr();
        a.compMask = REG_MR_MASK_FD | REG_MR_MASK_FD_OFFSET | REG_MR_MASK_IOVA;
        a.fd = fd;
        a.fdOffset = fdOffset;
        a.length = length;
        a.iova = iova;
        a.access = access;
        return a;
    }
}
