package org.peerdirect.hca.cx4;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.engine.HwCommandException;

/**
 * A command that failed a check: the status and the model's syndrome ({@link Syndromes}) its
 * output gets, and why (the firmware's log line). Thrown by a command's handler, caught by
 * the firmware's {@code execute}; nothing else reaches the command queue.
 */
final class Refused extends Exception {

    final int status;
    final int syndrome;

    Refused(int status, int syndrome, String why) {
        super(why, null, false, false);
        this.status = status;
        this.syndrome = syndrome;
    }

    /** The transport engine's refusal as a command status ({@code SYND_ENGINE}); a bad size is a bad parameter. */
    static Refused of(HwCommandException e) {
        int st = e.status() == HwCommandException.STAT_BAD_SIZE ? Mlx5Cmd.STAT_BAD_PARAM_ERR : e.status();
        return new Refused(st, Syndromes.SYND_ENGINE, e.getMessage());
    }
}
