package org.peerdirect.mlx5.core;

import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;

/**
 * The {@code mlx5:} shell commands, the view Linux gives through debugfs and devlink health:
 * {@code mlx5:cmdlog} (recent commands: opcode name, op_mod, completion mode, status, syndrome,
 * latency), {@code mlx5:pages} (firmware pages given, taken, held), {@code mlx5:eqs} and
 * {@code mlx5:health} (with {@code -w} to wait for the health poll's verdict), {@code mlx5:bdf}. Each takes {@code -d mlx5_N} (default: every device).
 */
@Component(service = Mlx5Commands.class, property = { "osgi.command.scope=mlx5", "osgi.command.function=cmdlog",
        "osgi.command.function=pages", "osgi.command.function=eqs", "osgi.command.function=health",
        "osgi.command.function=bdf" })
public final class Mlx5Commands {

    private final Mlx5Driver driver;

    @Activate
    public Mlx5Commands(@Reference Mlx5Driver driver) {
        this.driver = driver;
    }

    private record Opts(List<Mlx5CoreDev> devs, int n) {
    }

    private Opts parse(String cmd, String[] args, boolean takesN) {
        String dev = null;
        int n = 40;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if ((a.equals("-d") || a.equals("--ib-dev")) && i + 1 < args.length) {
                dev = args[++i];
            } else if (takesN && a.equals("-n") && i + 1 < args.length) {
                n = (int) Args.integer(cmd, "-n", args[++i], 1, 256);
            } else {
                throw new UsageException(cmd + ": unknown argument '" + a + "' (it takes -d mlx5_N" + (takesN ? " and -n COUNT" : "") + ")");
            }
        }
        List<Mlx5CoreDev> devs;
        if (dev == null) {
            devs = driver.devices();
        } else {
            Mlx5CoreDev d = driver.device(dev);
            if (d == null) {
                throw new UsageException(cmd + ": no mlx5 device '" + dev + "' (there are: "
                        + driver.devices().stream().map(Mlx5CoreDev::name).toList() + ")");
            }
            devs = List.of(d);
        }
        return new Opts(devs, n);
    }

    private static String none(List<String> lines) {
        return lines.isEmpty() ? "no mlx5 device" : String.join("\n", lines);
    }

    @Descriptor("recent firmware commands of each mlx5 device: opcode, op_mod, completion mode, latency, status and syndrome. "
            + "Example: mlx5:cmdlog -d mlx5_0 -n 20")
    public String cmdlog(@Descriptor("[-d mlx5_N] [-n COUNT (default 40, at most 256)]") String... args) {
        Opts o = parse("mlx5:cmdlog", args, true);
        List<String> lines = new ArrayList<>();
        for (Mlx5CoreDev d : o.devs()) {
            List<CmdLog.Entry> es = d.cmdLog().entries();
            lines.add(String.format("%s (%s): %d commands, showing the last %d; completion by %s", d.name(), d.function().bdf(),
                    d.cmdLog().total(), Math.min(o.n(), es.size()), d.eventMode() ? "events" : "polling"));
            for (CmdLog.Entry e : es.subList(Math.max(0, es.size() - o.n()), es.size())) {
                lines.add("  " + e);
            }
        }
        return none(lines);
    }

    @Descriptor("firmware pages of each mlx5 device: held now, given per kind, taken back, page requests. Example: mlx5:pages")
    public String pages(@Descriptor("[-d mlx5_N]") String... args) {
        return none(parse("mlx5:pages", args, false).devs().stream().map(Mlx5CoreDev::pagesSummary).toList());
    }

    @Descriptor("the event queues of each mlx5 device. Example: mlx5:eqs -d mlx5_1")
    public String eqs(@Descriptor("[-d mlx5_N]") String... args) {
        List<String> lines = new ArrayList<>();
        for (Mlx5CoreDev d : parse("mlx5:eqs", args, false).devs()) {
            List<String> eqs = d.eqsSummary();
            lines.addAll(eqs.isEmpty() ? List.of(d.name() + ": no EQ") : eqs);
        }
        return none(lines);
    }

    @Descriptor("the PCI address of an mlx5 device (the target of /sys/class/infiniband/mlx5_N/device). "
            + "Example: bdf = (mlx5:bdf mlx5_1)")
    public String bdf(@Descriptor("mlx5_N") String name) {
        return parse("mlx5:bdf", new String[] {"-d", name}, false).devs().get(0).function().bdf();
    }

    @Descriptor("the health of each mlx5 device as the driver's health poll sees it; -w waits (at most SECONDS) until the poll "
            + "declares the device dead, as after hca:fw_fault. Example: mlx5:health -d mlx5_1 -w 10")
    public String health(@Descriptor("[-d mlx5_N] [-w SECONDS]") String... args) throws InterruptedException {
        List<String> rest = new ArrayList<>(List.of(args));
        int w = rest.indexOf("-w");
        long waitSeconds = -1;
        if (w >= 0) {
            if (w + 1 >= rest.size()) {
                throw new UsageException("mlx5:health: -w takes SECONDS");
            }
            waitSeconds = Args.integer("mlx5:health", "-w", rest.get(w + 1), 1, 600);
            rest.subList(w, w + 2).clear();
        }
        List<Mlx5CoreDev> devs = parse("mlx5:health", rest.toArray(String[]::new), false).devs();
        if (waitSeconds > 0) {
            if (devs.size() != 1) {
                throw new UsageException("mlx5:health: -w waits for one device: give -d mlx5_N");
            }
            if (!devs.get(0).awaitDead(waitSeconds * 1000)) {
                throw new IllegalStateException("mlx5:health: " + devs.get(0).name() + " is not dead after " + waitSeconds + " s: "
                        + devs.get(0).healthSummary());
            }
        }
        return none(devs.stream().map(Mlx5CoreDev::healthSummary).toList());
    }
}
