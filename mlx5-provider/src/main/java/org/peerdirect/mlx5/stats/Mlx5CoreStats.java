package org.peerdirect.mlx5.stats;

import java.util.List;
import java.util.Map;

import org.osgi.annotation.versioning.ProviderType;

/**
 * One mlx5 device's command log, firmware pages and event queues, as the {@code mlx5:} commands
 * print them. Every method returns a snapshot and is cheap (no firmware command); after the device
 * is removed the service is gone, and a caller holding it still gets the last values.
 */
@ProviderType
public interface Mlx5CoreStats {

    /** Service property: the device name, {@code mlx5_N}. */
    String DEVICE_PROPERTY = "mlx5.name";

    /** One finished firmware command, as a line of {@code mlx5:cmdlog}. */
    record Command(long seq, String opcode, int opMod, boolean events, double latencyMicros, String result) {
    }

    String name();

    /** The PCI function, {@code 0000:05:00.0}. */
    String bdf();

    /** Commands issued since the device came up. */
    long commandsTotal();

    /** The last {@code n} commands (at most the log's capacity), oldest first. */
    List<Command> commands(int n);

    /** Firmware pages: held now, given per kind, taken back, page requests, and the driver's DMA pages. */
    Map<String, Long> pages();

    /** One line per event queue, as {@code mlx5:eqs}. */
    List<String> eqs();
}
