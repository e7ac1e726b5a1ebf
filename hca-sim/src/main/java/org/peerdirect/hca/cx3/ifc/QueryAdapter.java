package org.peerdirect.hca.cx3.ifc;

/**
 * The output mailbox of {@code QUERY_ADAPTER} ({@code mlx4_QUERY_ADAPTER}): the INTx pin and the
 * vendor-specific data, whose Mellanox form carries the board id (PSID).
 */
public final class QueryAdapter {

    public static final int INTA_PIN = 0x10;
    /** be16: who wrote the VSD (0x15b3: Mellanox, with the board id at {@link #VSD_BOARD_ID}). */
    public static final int VSD_VENDOR_ID = 0x1e;
    public static final int VSD = 0x20;
    /** The board id, NUL-padded ASCII ({@code VSD_OFFSET_MLX_BOARD_ID}). */
    public static final int VSD_BOARD_ID = VSD + 0xd0;
    /** {@code MLX4_BOARD_ID_LEN}. */
    public static final int BOARD_ID_LEN = 64;

    private QueryAdapter() {
    }
}
