package org.peerdirect.hca.cx3.fw;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;

/**
 * A command the firmware refuses: the status the HCR gets ({@code CMD_STAT_*}) and why, for the
 * firmware's log ({@link Firmware#lastRefusal}). Never leaves the firmware thread.
 */
final class Refused extends Exception {
    private static final long serialVersionUID = 1L;

    final int status;

    Refused(int status, String why) {
        super(Mlx4Cmd.statusName(status) + ": " + why, null, false, false);
        this.status = status;
    }
}
