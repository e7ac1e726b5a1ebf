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
    public static final int PD = 0x18;
    /** be16. */
    public static final int LIMIT_WATERMARK = 0x1c;
    public static final int WQE_CNT = 0x1e;

    private SrqContext() {
    }
}
