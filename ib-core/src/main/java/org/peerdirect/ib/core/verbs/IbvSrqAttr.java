package org.peerdirect.ib.core.verbs;

/**
 * {@code struct ibv_srq_attr} with the {@code enum ibv_srq_attr_mask} bits: what
 * {@link IbvSrq#query()} returns and {@link IbvSrq#modify} takes.
 */
public final class IbvSrqAttr {

    /** {@code IBV_SRQ_MAX_WR}: resize (neither mlx4 nor mlx5 can: EINVAL there). */
    public static final int MAX_WR = 1;
    /** {@code IBV_SRQ_LIMIT}: arm the limit event; 0 disarms. */
    public static final int LIMIT = 1 << 1;

    /** {@code max_wr}: requests the SRQ holds. */
    public int maxWr;
    /** {@code max_sge}. */
    public int maxSge;
    /**
     * {@code srq_limit}: when the SRQ is armed and fewer requests than this remain, the device
     * raises {@link IbvEventType#SRQ_LIMIT_REACHED} once and disarms (a query reads 0 again).
     */
    public int srqLimit;

    public IbvSrqAttr() {
    }

    public IbvSrqAttr(int maxWr, int maxSge, int srqLimit) {
        this.maxWr = maxWr;
        this.maxSge = maxSge;
        this.srqLimit = srqLimit;
    }

    @Override
    public String toString() {
        return "max_wr " + maxWr + ", max_sge " + maxSge + ", srq_limit " + srqLimit;
    }
}
