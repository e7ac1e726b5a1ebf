package org.peerdirect.hca.engine;

/**
 * The QP state-transition commands ({@code MLX4_CMD_*_QP} of {@code include/linux/mlx4/cmd.h})
 * with the hardware QP states each accepts and produces. A command in a state it does not accept
 * completes with {@link HwCommandException#STAT_BAD_QP_STATE}.
 */
public enum QpCommand {
    RST2INIT(0x19, HwQpState.INIT, HwQpState.RST),
    INIT2INIT(0x2d, HwQpState.INIT, HwQpState.INIT),
    INIT2RTR(0x1a, HwQpState.RTR, HwQpState.INIT),
    RTR2RTS(0x1b, HwQpState.RTS, HwQpState.RTR),
    RTS2RTS(0x1c, HwQpState.RTS, HwQpState.RTS),
    SQERR2RTS(0x1d, HwQpState.RTS, HwQpState.SQER),
    RTS2SQD(0x1f, HwQpState.SQD, HwQpState.RTS),
    SQD2SQD(0x38, HwQpState.SQD, HwQpState.SQD),
    SQD2RTS(0x20, HwQpState.RTS, HwQpState.SQD),
    /** Any state to ERR. */
    TO_ERR(0x1e, HwQpState.ERR),
    /** Any state to RST. */
    TO_RST(0x21, HwQpState.RST);

    /** The command opcode. */
    public final int opcode;
    /** The state after the command. */
    public final HwQpState to;
    private final HwQpState from;

    QpCommand(int opcode, HwQpState to, HwQpState from) {
        this.opcode = opcode;
        this.to = to;
        this.from = from;
    }

    QpCommand(int opcode, HwQpState to) {
        this(opcode, to, null);
    }

    /** Whether the command applies to a QP in {@code state}. */
    public boolean acceptedIn(HwQpState state) {
        return from == null || from == state;
    }

    /** The command that moves a QP from {@code from} to {@code to}, or null when there is none. */
    public static QpCommand between(HwQpState from, HwQpState to) {
        if (to == HwQpState.ERR) {
            return TO_ERR;
        }
        if (to == HwQpState.RST) {
            return TO_RST;
        }
        for (QpCommand c : values()) {
            if (c.from == from && c.to == to) {
                return c;
            }
        }
        return null;
    }
}
