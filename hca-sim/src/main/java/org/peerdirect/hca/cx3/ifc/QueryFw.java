package org.peerdirect.hca.cx3.ifc;

/**
 * The output mailbox of {@code QUERY_FW} ({@code mlx4_QUERY_FW} in {@code fw.c}): the firmware
 * version, the command interface revision, how many commands may be outstanding and how many
 * 4 KiB pages the firmware area needs ({@code MAP_FA} before {@code RUN_FW}).
 */
public final class QueryFw {

    /** be64: major << 32 | minor << 16 | subminor. */
    public static final int FW_VER = 0x00;
    /** be16. */
    public static final int CMD_IF_REV = 0x0a;
    /** u8: log2 of the commands that may be outstanding in event mode. */
    public static final int MAX_CMD = 0x0f;
    /** be16: pages of the firmware area. */
    public static final int FW_PAGES = 0x10;
    /** be64 and u8: where the interrupt-clear register is (BAR and offset). */
    public static final int CLR_INT_BASE = 0x20;
    public static final int CLR_INT_BAR = 0x28;
    public static final int OUT_SIZE = 0x100;

    private QueryFw() {
    }
}
