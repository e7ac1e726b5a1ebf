package org.peerdirect.hca.cx3.ifc;

/**
 * {@code struct mlx4_srq_context} (64 bytes), the input of {@code SW2HW_SRQ} and output of
 * {@code QUERY_SRQ} (input modifier: the SRQN); {@code HW2SW_SRQ} takes the SRQN, {@code ARM_SRQ}
 * the limit watermark as input parameter and the SRQN as modifier.
 */
public final class SrqContext {

    public static final int SIZE = 0x40;
    /** be32: state (bits 31..28), log2 size (bits 27..24), SRQN (23..0). */
    public static final int STATE_LOGSIZE_SRQN = 0x00;
    /** u8: log2 of the WQE stride minus 4. */
    public static final int LOGSTRIDE = 0x04;
    /** be32: page offset (31..24, in 64-byte units), the XRC SRQ's CQN. */
    public static final int PG_OFFSET_CQN = 0x08;
    /** u8: log2 of the buffer's page size minus 12. */
    public static final int LOG_PAGE_SIZE = 0x10;
    /** u8 + be32: the byte address of the buffer's first MTT entry ({@code mlx4_mtt_addr}). */
    public static final int MTT_BASE_ADDR_H = 0x13;
    public static final int MTT_BASE_ADDR_L = 0x14;
    public static final int PD = 0x18;
    /** be16. */
    public static final int LIMIT_WATERMARK = 0x1c;
    public static final int WQE_CNT = 0x1e;
    /** be16: WQEs the device took. */
    public static final int WQE_COUNTER = 0x22;
    /** be64: the bus address of the SRQ's doorbell record (be32 counter of WQEs posted, 16 bits). */
    public static final int DB_REC_ADDR = 0x28;

    private SrqContext() {
    }
}
