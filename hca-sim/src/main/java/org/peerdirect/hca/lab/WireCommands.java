package org.peerdirect.hca.lab;

import java.util.Map;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.cx4.ConnectX4Model;
import org.peerdirect.hca.engine.WirePort;

/**
 * {@code hca:wire} (each HCA port's link: the fabric, or its wire with addresses and
 * neighbours) and, through {@link Statistic}, {@code rdma:statistic} (iproute2's
 * {@code rdma statistic show link}: a port's hardware counters with rxe's names), for the
 * Ethernet ports of the HCA models. Ports are named by the function's bus address, as the
 * silicon knows them.
 */
@Component(service = WireCommands.class, property = {"osgi.command.scope=hca", "osgi.command.function=wire"})
public final class WireCommands {

    /** {@code rdma:statistic}: the same component's counters under the rdma scope. */
    @Component(service = Statistic.class, property = {"osgi.command.scope=rdma", "osgi.command.function=statistic"})
    public static final class Statistic {
        private final WireCommands commands;

        @Activate
        public Statistic(@Reference ConnectX4Model cx4) {
            this.commands = new WireCommands(cx4);
        }

        @Descriptor("a wire port's hardware counters (rxe's names: sent_pkts, rcvd_pkts, duplicate_request, out_of_seq_request, "
                + "rcvd_seq_err, retry_exceeded_err, completer_retry_err, rcvd_rnr_err, send_rnr_err, ack_deferred, ...), as "
                + "'rdma statistic show link'")
        public String statistic(@Descriptor("[bdf[/port]]: one port (default: every port on a wire)") String... which) {
            return commands.statistic(which);
        }
    }

    private final ConnectX4Model cx4;
    private final org.osgi.service.cm.ConfigurationAdmin cm;

    @Activate
    public WireCommands(@Reference ConnectX4Model cx4, @Reference org.osgi.service.cm.ConfigurationAdmin cm) {
        this.cx4 = cx4;
        this.cm = cm;
    }

    private WireCommands(ConnectX4Model cx4) {
        this.cx4 = cx4;
        this.cm = null;
    }

    static String gid(byte[] g) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 16; i += 2) {
            if (i > 0) {
                b.append(':');
            }
            b.append(String.format("%02x%02x", g[i], g[i + 1]));
        }
        return b.toString();
    }

    /** The counters of the ports on a wire ({@code which}: a bdf[/port] prefix, or all). */
    String statistic(String... which) {
        StringBuilder b = new StringBuilder();
        for (Map.Entry<String, ConnectX4Device> e : cx4.devices().entrySet()) {
            WirePort w = e.getValue().wire(1);
            String name = e.getKey() + "/1";
            if (w == null || which.length > 0 && !name.startsWith(which[0])) {
                continue;
            }
            b.append("link ").append(name);
            w.counters().snapshot().forEach((k, v) -> b.append(' ').append(k).append(' ').append(v));
            b.append('\n');
        }
        return b.length() == 0 ? "no port is on a wire (configure " + WireLinks.PID + ")" : b.toString();
    }

    @Descriptor("puts an Ethernet HCA port on a UDP tunnel of Ethernet frames (QEMU's -netdev socket,udp= format), or back on the "
            + "fabric; writes the factory configuration " + WireLinks.PID + " named <bdf>/1. Example: hca:wire 0000:04:00.0 udp "
            + "127.0.0.1:7000 127.0.0.1:7001 10.99.0.1 drop=0.01 seed=7")
    public String wire(@Descriptor("the function's bus address (kernel:lspci)") String bdf, @Descriptor("udp | fabric") String link,
            @Descriptor("for udp: LOCAL REMOTE IP (host:port host:port a.b.c.d), then any of mac= mtu= prefix= drop= duplicate= "
                    + "reorder= corrupt= delay.ms= seed=") String... args) throws java.io.IOException {
        if (!cx4.devices().containsKey(bdf)) {
            throw new org.peerdirect.kernel.shell.UsageException("hca:wire: no ConnectX-4+ model at '" + bdf + "' (there are: "
                    + cx4.devices().keySet() + ")");
        }
        org.osgi.service.cm.Configuration c = cm.getFactoryConfiguration(WireLinks.PID, bdf.replace(':', '_') + "_1", "?");
        if (link.equals("fabric")) {
            c.delete();
            return bdf + "/1: on the in-JVM fabric";
        }
        if (!link.equals("udp") || args.length < 3) {
            throw new org.peerdirect.kernel.shell.UsageException("hca:wire: udp LOCAL REMOTE IP [key=value ...], or fabric");
        }
        java.util.Hashtable<String, Object> p = new java.util.Hashtable<>();
        p.put("device", bdf);
        p.put("port", 1);
        p.put("link", "udp");
        p.put("local", args[0]);
        p.put("remote", args[1]);
        p.put("ip", args[2]);
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                throw new org.peerdirect.kernel.shell.UsageException("hca:wire: '" + args[i] + "' is not key=value");
            }
            String k = args[i].substring(0, eq);
            String v = args[i].substring(eq + 1);
            try {
                switch (k) {
                    case "mac" -> p.put(k, v);
                    case "mtu", "prefix" -> p.put(k, Integer.parseInt(v));
                    case "drop", "duplicate", "reorder", "corrupt" -> p.put(k, Double.parseDouble(v));
                    case "delay.ms", "seed" -> p.put(k, Long.parseLong(v));
                    default -> throw new org.peerdirect.kernel.shell.UsageException("hca:wire: no property '" + k
                            + "' (mac mtu prefix drop duplicate reorder corrupt delay.ms seed)");
                }
            } catch (NumberFormatException e) {
                throw new org.peerdirect.kernel.shell.UsageException("hca:wire: " + k + "=" + v + " is not a number");
            }
        }
        c.update(p);
        // Configuration Admin and SCR attach it on their threads: wait (bounded) until the port shows it
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cx4.devices().get(bdf).wire(1) == null) {
            if (System.nanoTime() - deadline > 0) {
                return bdf + "/1: configured, not attached after 10 s (see the log and scr:list)";
            }
            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
        }
        return bdf + "/1: " + cx4.devices().get(bdf).wire(1).describe();
    }

    @Descriptor("each HCA port's link: the in-JVM fabric or its wire (UDP tunnel, addresses, GID, neighbours)")
    public String wire() {
        StringBuilder b = new StringBuilder();
        for (Map.Entry<String, ConnectX4Device> e : cx4.devices().entrySet()) {
            WirePort w = e.getValue().wire(1);
            b.append(e.getKey()).append("/1: ");
            if (w == null) {
                b.append("fabric\n");
                continue;
            }
            b.append(w.describe()).append("\n  gid ").append(gid(w.gid(1))).append('\n');
            w.neighbours().describe().lines().forEach(l -> b.append("  neigh ").append(l).append('\n'));
        }
        return b.toString();
    }
}
