package org.peerdirect.hca.cx3.ifc;

/**
 * MTT entries (be64 bus address of a page | {@link #PRESENT}) and the input mailbox of
 * {@code WRITE_MTT} ({@code mlx4_WRITE_MTT}): the first entry's index, a reserved be64, then
 * the entries; their count is the input modifier. A context names its MTT by the byte offset of
 * its first entry in the MTT table ({@code mlx4_mtt_addr}: index × {@link #ENTRY_SIZE}).
 */
public final class Mtt {

    public static final int ENTRY_SIZE = 8;
    /** {@code MLX4_MTT_FLAG_PRESENT}. */
    public static final long PRESENT = 1;
    public static final int WRITE_START = 0x00;
    public static final int WRITE_ENTRIES = 0x10;
    /** Entries one {@code WRITE_MTT} carries. */
    public static final int MAX_WRITE = (Mlx4Cmd.MAILBOX_SIZE - WRITE_ENTRIES) / ENTRY_SIZE;

    private Mtt() {
    }
}
