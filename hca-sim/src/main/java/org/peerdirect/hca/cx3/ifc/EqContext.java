package org.peerdirect.hca.cx3.ifc;

/**
 * {@code struct mlx4_eq_context}, the input of {@code SW2HW_EQ} (input modifier: the EQ number)
 * and output of {@code QUERY_EQ}: state, size, interrupt vector and the MTT of its ring.
 * {@code MAP_EQ} takes the event mask as input parameter and {@code unmap << 31 | eqn} as modifier.
 */
public final class EqContext {

    public static final int SIZE = 0x40;
    /** be32: status (bits 31..28) and state (bits 11..8). */
    public static final int FLAGS = 0x00;
    public static final int STATUS_OK = 0;
    public static final int STATE_ARMED = 0x9 << 8;
    public static final int STATE_FIRED = 0xa << 8;
    public static final int STATE_ALWAYS_ARMED = 0xb << 8;
    /** be16. */
    public static final int PAGE_OFFSET = 0x0a;
    /** u8. */
    public static final int LOG_EQ_SIZE = 0x0c;
    /** u8: the MSI-X vector. */
    public static final int INTR = 0x17;
    /** u8: log2 page size - 12. */
    public static final int LOG_PAGE_SIZE = 0x18;
    /** u8 and be32: the MTT's byte address. */
    public static final int MTT_BASE_ADDR_H = 0x1b;
    public static final int MTT_BASE_ADDR_L = 0x1c;
    public static final int CONSUMER_INDEX = 0x28;
    public static final int PRODUCER_INDEX = 0x2c;

    /** The largest EQ the model takes (entries, log2). */
    public static final int MAX_LOG_EQ_SIZE = 16;

    private EqContext() {
    }
}
