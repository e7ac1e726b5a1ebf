package org.peerdirect.hca.cx3.ifc;

/**
 * {@code struct mlx4_cq_context} (64 bytes), the input of {@code SW2HW_CQ} (input modifier: the
 * CQN) and the output of {@code QUERY_CQ}; {@code HW2SW_CQ} takes the CQN.
 */
public final class CqContext {

    public static final int SIZE = 0x40;
    /**
     * be32: flags; in what {@code QUERY_CQ} returns, the CQ's status in bits 31..28 (the PRM's
     * {@code cq_status}, as {@code mlx5_ifc} names it: OK, or overflow once the device had a CQE
     * and no free entry for it).
     */
    public static final int FLAGS = 0x00;
    public static final int STATUS_SHIFT = 28;
    public static final int STATUS_OK = 0x0;
    public static final int STATUS_OVERFLOW = 0x9;
    /** be32: log2 of the CQEs (bits 28..24), the UAR page (23..0). */
    public static final int LOGSIZE_USRPAGE = 0x0c;
    /** u8: the EQ its completion events go to. */
    public static final int COMP_EQN = 0x17;
    /** u8: log2 of the ring's page size minus 12 (the model takes 4 KiB pages: 0). */
    public static final int LOG_PAGE_SIZE = 0x18;
    /** u8 and be32: the byte address in the MTT table of the ring's first entry ({@code mlx4_mtt_addr}); the ring starts at offset 0 of its first page. */
    public static final int MTT_BASE_ADDR_H = 0x1b;
    public static final int MTT_BASE_ADDR_L = 0x1c;
    /** be32 (23..0) in what {@code QUERY_CQ} returns. */
    public static final int CONSUMER_INDEX = 0x28;
    public static final int PRODUCER_INDEX = 0x2c;
    /** be64: the bus address of the CQ's doorbell record ({@link Cqe#DB_SET_CI}), 8-byte aligned. */
    public static final int DB_REC_ADDR = 0x38;

    private CqContext() {
    }
}
