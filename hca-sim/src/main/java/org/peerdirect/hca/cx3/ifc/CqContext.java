package org.peerdirect.hca.cx3.ifc;

/**
 * {@code struct mlx4_cq_context} (64 bytes), the input of {@code SW2HW_CQ} (input modifier: the
 * CQN); {@code HW2SW_CQ} takes the CQN.
 */
public final class CqContext {

    public static final int SIZE = 0x40;
    public static final int FLAGS = 0x00;
    /** be32: log2 of the CQEs (bits 28..24), the UAR page (23..0). */
    public static final int LOGSIZE_USRPAGE = 0x0c;
    /** u8: the EQ its completion events go to. */
    public static final int COMP_EQN = 0x17;
    public static final int LOG_PAGE_SIZE = 0x18;
    public static final int MTT_BASE_ADDR_H = 0x1b;
    public static final int MTT_BASE_ADDR_L = 0x1c;
    public static final int CONSUMER_INDEX = 0x28;
    public static final int PRODUCER_INDEX = 0x2c;
    /** be64. */
    public static final int DB_REC_ADDR = 0x38;

    private CqContext() {
    }
}
