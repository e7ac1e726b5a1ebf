package org.peerdirect.hca.cx4;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;

/**
 * The function's state as the firmware keeps it, moved only by commands: {@code ENABLE_HCA} must
 * be the first, {@code INIT_HCA} opens the objects, {@code TEARDOWN_HCA} closes them, and
 * {@code DISABLE_HCA} is the last (Seed 002: "ENABLE_HCA must be the first command",
 * "DISABLE_HCA is always the last command executed").
 */
enum HcaState {
    DISABLED, ENABLED, INITIALIZED;

    /**
     * The state after {@code opcode} succeeds in this state, or null when the command is not
     * allowed in it ({@code BAD_SYS_STATE}). A command that fails leaves the state as it was.
     */
    HcaState next(int opcode) {
        return switch (opcode) {
            case Mlx5Cmd.NOP -> this;
            case Mlx5Cmd.ENABLE_HCA -> this == DISABLED || this == ENABLED ? ENABLED : null;
            case Mlx5Cmd.DISABLE_HCA -> this == ENABLED ? DISABLED : null;
            case Mlx5Cmd.SET_ISSI, Mlx5Cmd.SET_HCA_CAP -> this == ENABLED ? this : null;
            case Mlx5Cmd.QUERY_ISSI, Mlx5Cmd.QUERY_PAGES, Mlx5Cmd.MANAGE_PAGES, Mlx5Cmd.QUERY_HCA_CAP -> this != DISABLED ? this : null;
            case Mlx5Cmd.INIT_HCA -> this == ENABLED ? INITIALIZED : null;
            case Mlx5Cmd.TEARDOWN_HCA -> this == INITIALIZED ? ENABLED : null;
            default -> this == INITIALIZED ? this : null; // the objects' commands
        };
    }
}
