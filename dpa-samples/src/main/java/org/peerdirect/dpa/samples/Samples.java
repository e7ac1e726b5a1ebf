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

    static final String LIST = String.join("\n",
            "rpc    FlexIO RPC: __dpa_rpc__ rpc_calculate adds its two arguments on the DPA, the host prints the result "
                    + "(DPA_MODEL.md scenario 1)",
            "echo   an event handler echoes N messages (-n, default " + DEFAULT_MESSAGES + ") upper-cased over an RC QP between a host QP "
                    + "and the DPA, rings in DPA memory, bursts racing the arm (scenario 2)",
            "fence  the echo handler without __dpa_thread_memory_writeback before its doorbell: the memory-model checker ends the "
                    + "process; prints the finding with its handler line and the process status",
            "usage: dpa:sample NAME [-d DEVICE (default " + DEFAULT_DEVICE + ")] [-n MESSAGES]");

    private Samples() {
    }

    static String run(IbvDeviceList devices, Mm mm, EchoSample.Findings findings, Object... args) {
        if (args.length == 0) {
            return LIST;
        }
        String name = String.valueOf(args[0]);
        String dev = DEFAULT_DEVICE;
        int n = DEFAULT_MESSAGES;
        List<Object> rest = new ArrayList<>(List.of(args).subList(1, args.length));
        while (!rest.isEmpty()) {
            String opt = String.valueOf(rest.remove(0));
            if (rest.isEmpty()) {
                throw new UsageException("dpa:sample: " + opt + " wants a value, or is not an option (-d DEVICE, -n MESSAGES)");
            }
            String v = String.valueOf(rest.remove(0));
            switch (opt) {
                case "-d" -> dev = v;
                case "-n" -> n = messages(v);
                default -> throw new UsageException("dpa:sample: unknown option " + opt + " (-d DEVICE, -n MESSAGES)");
            }
        }
        if (!List.of("rpc", "echo", "fence").contains(name)) {
            throw new UsageException("dpa:sample: no sample " + name + "; the samples:\n" + LIST);
        }
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
