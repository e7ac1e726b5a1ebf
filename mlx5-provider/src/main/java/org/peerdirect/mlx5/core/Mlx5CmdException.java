package org.peerdirect.mlx5.core;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;

/**
 * A command that failed: not delivered (a delivery status), refused by the firmware (status and
 * syndrome), timed out, or not sent because the device is gone or dead. The message reads as the
 * kernel's {@code mlx5_cmd_out_err} line; {@link #errno} is {@code cmd_status_to_err}'s answer.
 */
public final class Mlx5CmdException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public enum Kind {
        /** The entry came back with a delivery status. */
        DELIVERY,
        /** The firmware executed it and answered a non-zero status. */
        STATUS,
        /** The firmware did not hand the entry back in time. */
        TIMEOUT,
        /** The function is gone or the firmware dead: nothing was sent. */
        DEVICE_GONE
    }

    private final Kind kind;
    private final int opcode;
    private final int status;
    private final int syndrome;

    Mlx5CmdException(Kind kind, int opcode, int opMod, int status, int syndrome, String detail) {
        super(message(kind, opcode, opMod, status, syndrome, detail));
        this.kind = kind;
        this.opcode = opcode;
        this.status = status;
        this.syndrome = syndrome;
    }

    private static String message(Kind kind, int opcode, int opMod, int status, int syndrome, String detail) {
        String cmd = String.format("%s(0x%x) op_mod(0x%x)", Mlx5Cmd.name(opcode), opcode, opMod);
        return switch (kind) {
            case DELIVERY -> String.format("%s: delivery failed, %s (0x%x)", cmd, CmdEntry.deliveryName(status), status);
            case STATUS -> String.format("%s failed, status %s(0x%x), syndrome (0x%x)", cmd, Mlx5Cmd.statusName(status), status, syndrome);
            case TIMEOUT -> String.format("%s: timeout, no completion from the firmware (%s)", cmd, detail);
            case DEVICE_GONE -> String.format("%s: not sent, %s", cmd, detail);
        };
    }

    public Kind kind() {
        return kind;
    }

    public int opcode() {
        return opcode;
    }

    /** The command status (STATUS) or delivery status (DELIVERY); 0 otherwise. */
    public int status() {
        return status;
    }

    public int syndrome() {
        return syndrome;
    }

    /** The Linux errno ({@code cmd_status_to_err}; delivery errors -EREMOTEIO, a timeout -ETIMEDOUT, a dead device -ENXIO). */
    public int errno() {
        return switch (kind) {
            case DELIVERY -> -121;
            case TIMEOUT -> -110;
            case DEVICE_GONE -> -6;
            case STATUS -> switch (status) {
                case Mlx5Cmd.STAT_INT_ERR, Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, Mlx5Cmd.STAT_BAD_INP_LEN_ERR, Mlx5Cmd.STAT_BAD_OUTP_LEN_ERR -> -5;
                case Mlx5Cmd.STAT_RES_BUSY -> -16;
                case Mlx5Cmd.STAT_NOT_READY, Mlx5Cmd.STAT_NO_RES_ERR -> -11;
                case Mlx5Cmd.STAT_LIM_ERR -> -12;
                default -> -22;
            };
        };
    }
}
