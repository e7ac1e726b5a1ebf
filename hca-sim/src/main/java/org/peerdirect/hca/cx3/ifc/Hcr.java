package org.peerdirect.hca.cx3.ifc;

/**
 * The Host Command Register in BAR0 ({@code mlx4_cmd_post} in {@code cmd.c}): seven big-endian
 * dwords at {@link #BASE}. The driver writes the parameters, then the last dword with the
 * {@link #GO_BIT}, the toggle bit, the event bit, the opcode modifier and the opcode; the
 * hardware executes, writes the output parameter and the status (the top byte of the last dword)
 * and clears the go bit. A command is pending while the go bit is set or the toggle bit still
 * equals the driver's next toggle.
 */
public final class Hcr {

    /** {@code MLX4_HCR_BASE}: the HCR's offset in BAR0. */
    public static final long BASE = 0x80680;
    /** {@code MLX4_HCR_SIZE}. */
    public static final int SIZE = 0x1c;

    public static final int IN_PARAM = 0x00;
    public static final int IN_MODIFIER = 0x08;
    public static final int OUT_PARAM = 0x0c;
    public static final int TOKEN = 0x14;
    /** The last dword: status (bits 31..24), go, event, toggle, opcode modifier, opcode. */
    public static final int STATUS = 0x18;

    public static final int OPMOD_SHIFT = 12;
    public static final int T_BIT = 21;
    public static final int E_BIT = 22;
    public static final int GO_BIT = 23;
    public static final int STATUS_SHIFT = 24;

    /**
     * The software reset register ({@code MLX4_RESET_BASE} + {@code MLX4_RESET_OFFSET}): a
     * big-endian 1 written there resets the chip ({@code mlx4_reset}).
     */
    public static final long RESET = 0xf0000 + 0x10;
    public static final int RESET_VALUE = 1;

    /** The token of a polled command ({@code CMD_POLL_TOKEN}). */
    public static final int POLL_TOKEN = 0xffff;

    private Hcr() {
    }

    /** The last dword as the driver writes it. */
    public static int goWord(int opcode, int opModifier, boolean event, int toggle) {
        return 1 << GO_BIT | (toggle & 1) << T_BIT | (event ? 1 << E_BIT : 0) | (opModifier & 0xff) << OPMOD_SHIFT | opcode & 0xfff;
    }

    public static int opcode(int word) {
        return word & 0xfff;
    }

    public static int opModifier(int word) {
        return word >>> OPMOD_SHIFT & 0xff;
    }

    public static boolean go(int word) {
        return (word >>> GO_BIT & 1) != 0;
    }

    public static boolean event(int word) {
        return (word >>> E_BIT & 1) != 0;
    }

    public static int toggle(int word) {
        return word >>> T_BIT & 1;
    }

    public static int status(int word) {
        return word >>> STATUS_SHIFT & 0xff;
    }
}
