package org.peerdirect.dpa.samples;

import java.util.ArrayList;
import java.util.List;

import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.shell.UsageException;

/**
 * {@code dpa:sample [NAME] [-d DEV] [-n N]}: parses the arguments and runs one sample in a fresh
 * simulated process ({@code dpa_sample_NAME}) that opens the device, runs, and exits, also when
 * the sample fails; without a name it lists the samples.
 */
final class Samples {

    /** The container's BlueField-3 (its integrated ConnectX-7): the device with a DPA. */
    static final String DEFAULT_DEVICE = "mlx5_2";
    static final int DEFAULT_MESSAGES = 8;
    static final int MAX_MESSAGES = 1024;
    static final long MAX_DELAY_MS = 60_000;

    static final String LIST = String.join("\n",
            "rpc    FlexIO RPC: __dpa_rpc__ rpc_calculate adds its two arguments on the DPA, the host prints the result "
                    + "(DPA_MODEL.md scenario 1)",
            "echo   an event handler echoes N messages (-n, default " + DEFAULT_MESSAGES + ") upper-cased over an RC QP between a host QP "
                    + "and the DPA, rings in DPA memory, bursts racing the arm (scenario 2)",
            "kernel_launch  DOCA's dpa_kernel_launch sample (doca-samples 3.3): hello_world launched with a wait event (threshold 4) "
                    + "a host thread sets to 5 after a delay (-w MS, default " + KernelLaunchSample.DEFAULT_DELAY_MS + " as the sample's sleep(5)), "
                    + "its completion event set to 10; prints the sample's DOCA log lines and the kernel's (scenario 5)",
            "initiator_target  DOCA's dpa_initiator_target sample (doca-samples 3.3): two DOCA RDMA connections on the DPA feed one "
                    + "completion context whose thread takes 4 sends with immediate, then notifies a second thread that sets a sync event "
                    + "to 10; prints the sample's DOCA log lines and the threads' (scenario 6)",
            "ping_pong  DOCA's dpa_ping_pong sample (doca-samples 3.3): a ping and a pong DPA thread, each with its DOCA RDMA context and "
                    + "completion context, exchange the values 0..99 by send/receive; prints the sample's lines and the threads' 200 "
                    + "iteration lines (scenario 7)",
            "nvqual  DOCA's dpa_nvqual EU qualification: one thread per available EU (but -e EU,EU,...) with strict affinity, "
                    + "memory and arithmetic kernels notified by one RPC, each adding 1 to an event the host waits on; prints the sample's "
                    + "JSON with each EU's cycles (scenario 10)",
            "nvqual_fence  nvqual on EUs 2, 3, 16 with a memory kernel that does not write its result back before the host's copy: "
                    + "the qualification fails and the checker's C1 names the store",
            "all_to_all  DOCA's dpa_all_to_all with its ranks in one JVM: 4 ranks, each a DPA context, over two BlueField-3s, "
                    + "post_write + signal_set per peer, N iterations (-n, default " + DEFAULT_MESSAGES + ") each checked against the transposed matrix (scenario 9)",
            "all_to_all_unordered  the same with each signal posted before its write: every block that crosses a connection is wrong",
            "fence  the echo handler without __dpa_thread_memory_writeback before its doorbell: the memory-model checker ends the "
                    + "process; prints the finding with its handler line and the process status",
            "usage: dpa:sample NAME [-d DEVICE (default " + DEFAULT_DEVICE + "; DOCA's samples: the first with a DPA)] [-n MESSAGES] [-w MS] [-e EU,...]");

    private Samples() {
    }

    static String run(IbvDeviceList devices, Mm mm, EchoSample.Findings findings, Object... args) {
        return run(devices, d -> null, mm, findings, args);
    }

    /**
     * As above; {@code pciAddrOf} gives DOCA's device list each device's PCI address (the
     * container's {@code pci.bdf} service properties), null where unknown.
     */
    static String run(IbvDeviceList devices, java.util.function.Function<IbvDevice, String> pciAddrOf, Mm mm, EchoSample.Findings findings,
            Object... args) {
        if (args.length == 0) {
            return LIST;
        }
        String name = String.valueOf(args[0]);
        String dev = null;
        int n = DEFAULT_MESSAGES;
        long delayMs = KernelLaunchSample.DEFAULT_DELAY_MS;
        java.util.Set<Integer> excluded = java.util.Set.of();
        List<Object> rest = new ArrayList<>(List.of(args).subList(1, args.length));
        while (!rest.isEmpty()) {
            String opt = String.valueOf(rest.remove(0));
            if (rest.isEmpty()) {
                throw new UsageException("dpa:sample: " + opt + " wants a value, or is not an option (-d DEVICE, -n MESSAGES, -w MS, -e EU,...)");
            }
            String v = String.valueOf(rest.remove(0));
            switch (opt) {
                case "-d" -> dev = v;
                case "-n" -> n = messages(v);
                case "-w" -> delayMs = delay(v);
                case "-e" -> excluded = eus(v);
                default -> throw new UsageException("dpa:sample: unknown option " + opt + " (-d DEVICE, -n MESSAGES, -w MS, -e EU,...)");
            }
        }
        if (!List.of("rpc", "echo", "fence", "kernel_launch", "initiator_target", "ping_pong", "nvqual", "nvqual_fence", "all_to_all", "all_to_all_unordered").contains(name)) {
            throw new UsageException("dpa:sample: no sample " + name + "; the samples:\n" + LIST);
        }
        if (name.equals("kernel_launch") || name.equals("initiator_target") || name.equals("ping_pong") || name.startsWith("nvqual") || name.startsWith("all_to_all")) {
            return docaSample(name, devices, pciAddrOf, mm, findings, dev, delayMs, excluded, n);
        }
        dev = dev == null ? DEFAULT_DEVICE : dev;
        IbvDevice d = devices.device(dev); // ENODEV naming it when there is none
        Out out = new Out();
        out.line("dpa:sample %s on %s", name, dev);
        AddressSpace proc = mm.createProcess("dpa_sample_" + name);
        try {
            proc.setMemlockLimit(Math.max(proc.memlockLimit(), 16L << 20));
            try (IbvContext ctx = d.open(proc)) {
                switch (name) {
                    case "rpc" -> RpcSample.run(ctx, out);
                    case "echo" -> EchoSample.echo(ctx, n, out);
                    default -> EchoSample.fence(ctx, findings, out);
                }
            }
        } catch (RuntimeException e) {
            throw new IllegalStateException(out + "\ndpa:sample " + name + " failed on " + dev + ": " + e.getMessage(), e);
        } finally {
            proc.exit();
        }
        return out.toString();
    }

    /**
     * DOCA's sample prints only its log lines (no header: what the real sample prints); it picks
     * the first device with a DPA unless {@code -d} names one, as its {@code -pf_dev} does.
     */
    private static String docaSample(String name, IbvDeviceList devices, java.util.function.Function<IbvDevice, String> pciAddrOf, Mm mm,
            EchoSample.Findings findings, String dev, long delayMs, java.util.Set<Integer> excluded, int n) {
        Out out = new Out();
        AddressSpace proc = mm.createProcess("dpa_sample_" + name);
        try {
            proc.setMemlockLimit(Math.max(proc.memlockLimit(), 16L << 20));
            switch (name) {
                case "kernel_launch" -> KernelLaunchSample.run(proc, devices, pciAddrOf, dev, delayMs, out);
                case "initiator_target" -> InitiatorTargetSample.run(proc, devices, pciAddrOf, dev, out);
                case "ping_pong" -> PingPongSample.run(proc, devices, pciAddrOf, dev, out);
                case "all_to_all", "all_to_all_unordered" -> AllToAllSample.sample(proc, devices, pciAddrOf, n, name.equals("all_to_all_unordered"), out);
                default -> NvqualSample.sample(proc, devices, pciAddrOf, dev, excluded, name.equals("nvqual_fence"), findings, out);
            }
        } catch (RuntimeException e) {
            throw new IllegalStateException(out + "\ndpa:sample " + name + " failed" + (dev == null ? "" : " on " + dev) + ": " + e.getMessage(), e);
        } finally {
            proc.exit();
        }
        return out.toString();
    }

    private static long delay(String v) {
        try {
            long ms = Long.parseLong(v);
            if (ms >= 0 && ms <= MAX_DELAY_MS) {
                return ms;
            }
        } catch (NumberFormatException e) {
            // the message below names the value
        }
        throw new UsageException("dpa:sample: -w " + v + ": a delay in milliseconds from 0 to " + MAX_DELAY_MS);
    }

    /** {@code -e 5,17,200}: EU ids from 0 to 255. */
    private static java.util.Set<Integer> eus(String v) {
        java.util.Set<Integer> s = new java.util.TreeSet<>();
        for (String e : v.split(",")) {
            try {
                int eu = Integer.parseInt(e.strip());
                if (eu >= 0 && eu < 256) {
                    s.add(eu);
                    continue;
                }
            } catch (NumberFormatException x) {
                // the message below names the value
            }
            throw new UsageException("dpa:sample: -e " + v + ": EU ids from 0 to 255, separated by commas");
        }
        return s;
    }

    private static int messages(String v) {
        try {
            int n = Integer.parseInt(v);
            if (n >= 1 && n <= MAX_MESSAGES) {
                return n;
            }
        } catch (NumberFormatException e) {
            // the message below names the value
        }
        throw new UsageException("dpa:sample: -n " + v + ": a number of messages from 1 to " + MAX_MESSAGES);
    }
}
