package org.peerdirect.mlx4;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;
import org.peerdirect.mlx4.core.CmdLog;
import org.peerdirect.mlx4.core.Mlx4Dev;

/**
 * The {@code mlx4:} shell commands: {@code mlx4:cmdlog}, the commands each ConnectX-3's driver
 * ran through the HCR (opcode name, op_mod, input modifier, polled or by event, latency, status),
 * the last ones or, with {@code -b}, the bring-up from QUERY_FW on; {@code mlx4:pages}, the DMA
 * pages each driver holds for its device (mailboxes, EQ rings, the firmware area, auxiliary ICM
 * and the ICM chunks backing the MTT).
 */
@Component(service = Mlx4Commands.class, property = { "osgi.command.scope=mlx4", "osgi.command.function=cmdlog",
        "osgi.command.function=pages" })
public final class Mlx4Commands {

    private final Mlx4Driver driver;

    @Activate
    public Mlx4Commands(@Reference Mlx4Driver driver) {
        this.driver = driver;
    }

    @Descriptor("the DMA pages each mlx4 driver holds mapped for its device: firmware area, auxiliary ICM, ICM chunks of the MTT, EQ "
            + "rings, mailboxes in use. Example: mlx4:pages")
    public String pages() {
        List<Mlx4Device> devs = new ArrayList<>(driver.devices());
        devs.sort(Comparator.comparing(Mlx4Device::name));
        List<String> lines = new ArrayList<>();
        for (Mlx4Device d : devs) {
            Mlx4Dev core = d.core();
            lines.add(String.format("%s (%s): ICM chunks of %d pages mapped %d; DMA pages live %d", d.name(), core.fn.bdf(),
                    org.peerdirect.mlx4.core.Icm.CHUNK_PAGES, core.icm.chunksMapped(), core.dma.live()));
        }
        return lines.isEmpty() ? "no mlx4 device" : String.join("\n", lines);
    }

    @Descriptor("the firmware commands each mlx4 device ran through its HCR: opcode, op_mod, in_mod, polled or by event, latency and "
            + "status; -b the bring-up (QUERY_FW, MAP_FA, RUN_FW, ... INIT_HCA, EQs, INIT_PORT). Example: mlx4:cmdlog -b -d mlx4_0")
    public String cmdlog(@Descriptor("[-d mlx4_N] [-n COUNT (default 40, at most 256)] [-b]") String... args) {
        String dev = null;
        int n = 40;
        boolean bringUp = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if ((a.equals("-d") || a.equals("--ib-dev")) && i + 1 < args.length) {
                dev = args[++i];
            } else if (a.equals("-n") && i + 1 < args.length) {
                n = (int) Args.integer("mlx4:cmdlog", "-n", args[++i], 1, 256);
            } else if (a.equals("-b")) {
                bringUp = true;
            } else {
                throw new UsageException("mlx4:cmdlog: unknown argument '" + a + "' (it takes -d mlx4_N, -n COUNT and -b)");
            }
        }
        List<Mlx4Device> devs = new ArrayList<>(driver.devices());
        devs.sort(Comparator.comparing(Mlx4Device::name));
        if (dev != null) {
            String want = dev;
            List<String> names = devs.stream().map(Mlx4Device::name).toList();
            devs.removeIf(d -> !d.name().equals(want));
            if (devs.isEmpty()) {
                throw new UsageException("mlx4:cmdlog: no mlx4 device '" + dev + "' (there are: " + names + ")");
            }
        }
        List<String> lines = new ArrayList<>();
        for (Mlx4Device d : devs) {
            Mlx4Dev core = d.core();
            CmdLog log = core.cmd.log();
            List<CmdLog.Entry> es = bringUp ? log.bringUp() : log.entries();
            List<CmdLog.Entry> shown = bringUp ? es : es.subList(Math.max(0, es.size() - n), es.size());
            lines.add(String.format("%s (%s, firmware %s, board %s): %d commands; %s; completion by %s now", d.name(), core.fn.bdf(),
                    core.fwInfo().version(), core.boardId(), log.total(), bringUp ? "the bring-up, " + es.size() + " commands"
                            : "the last " + shown.size(), core.cmd.eventMode() ? "events" : "polling"));
            for (CmdLog.Entry e : shown) {
                lines.add("  " + e);
            }
        }
        return lines.isEmpty() ? "no mlx4 device" : String.join("\n", lines);
    }
}
