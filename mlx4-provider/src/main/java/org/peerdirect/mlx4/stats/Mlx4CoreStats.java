package org.peerdirect.mlx4.stats;

import java.util.List;
import java.util.Map;

import org.osgi.annotation.versioning.ProviderType;

/**
 * The mlx4 devices bound now, as {@code mlx4:cmdlog} and {@code mlx4:pages} print them: one
 * service for all of them (the driver's). Every call returns a snapshot of values.
 */
@ProviderType
public interface Mlx4CoreStats {

    /**
     * One finished HCR command, as a line of {@code mlx4:cmdlog}.
     *
     * @param result {@code OK(0x0)} style status, or the driver's error (timeout, device gone)
     */
    record Command(long seq, String opcode, int opMod, int inMod, boolean events, double latencyMicros, String result) {
    }

    /**
     * One device.
     *
     * @param commandsTotal commands since the device came up
     * @param eventMode whether commands complete by event now (polling during the bring-up)
     * @param commands the last commands asked for, oldest first
     * @param pages the DMA pages the driver holds: ICM chunks mapped and DMA pages live
     */
    record Device(String name, String bdf, String firmware, String boardId, long commandsTotal, boolean eventMode, List<Command> commands,
            Map<String, Long> pages) {
    }

    /** Every mlx4 device bound now, by name, with its last {@code commands} commands (at most the log's capacity). */
    List<Device> devices(int commands);
}
