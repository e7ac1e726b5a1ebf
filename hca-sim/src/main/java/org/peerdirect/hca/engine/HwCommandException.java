package org.peerdirect.hca.engine;

/**
 * A firmware command that completed with a non-zero status ({@code CMD_STAT_*} of
 * {@code drivers/net/ethernet/mellanox/mlx4/cmd.c}). The driver turns the status into an errno
 * ({@code mlx4_status_to_errno}); the message names the command and what was wrong.
 */
public final class HwCommandException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public static final int STAT_INTERNAL_ERR = 0x01;
    public static final int STAT_BAD_OP = 0x02;
    public static final int STAT_BAD_PARAM = 0x03;
    public static final int STAT_BAD_SYS_STATE = 0x04;
    public static final int STAT_BAD_RESOURCE = 0x05;
    public static final int STAT_RESOURCE_BUSY = 0x06;
    public static final int STAT_EXCEED_LIM = 0x08;
    public static final int STAT_BAD_RES_STATE = 0x09;
    public static final int STAT_BAD_INDEX = 0x0a;
    public static final int STAT_BAD_QP_STATE = 0x10;
    public static final int STAT_BAD_SIZE = 0x40;

    private final int status;

    public HwCommandException(int status, String message) {
        super(String.format("status 0x%02x: %s", status, message));
        this.status = status;
    }

    /** The command status. */
    public int status() {
        return status;
    }
}
