package org.peerdirect.rdma.tools;

import java.util.List;
import java.util.concurrent.TimeUnit;

import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.kernel.mm.KernelException;

/**
 * {@code rdma:asyncwatch [-d dev] [-t ms] [-n count]}: the asynchronous events of a device, as
 * {@code ibv_asyncwatch} (rdma-core {@code libibverbs/examples/asyncwatch.c}), bounded in time and
 * count so that a script can wait for one event.
 */
final class Asyncwatch {

    static final String DESCRIPTION = "the asynchronous events of a device, as ibv_asyncwatch: opens a context and prints each event until -n events "
            + "or -t milliseconds. Only events of the device (ports, removal) reach a context that owns no QP or SRQ. "
            + "Example: rdma:asyncwatch -d mlx5_0 -t 2000 -n 1";

    private final ToolEnv env;

    Asyncwatch(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) throws InterruptedException {
        Options o = new Options("rdma:asyncwatch", "the asynchronous events of a device, as ibv_asyncwatch", args, List.of(
                Options.value("-d", "DEVICE", "the device (rdma:devices; default the first)", null),
                Options.value("-t", "MS", "watch this long at most", 10_000),
                Options.value("-n", "COUNT", "stop after this many events", Integer.MAX_VALUE)));
        if (o.help()) {
            return o.printUsage();
        }
        long ms = o.number("-t", 0, 3_600_000);
        long max = o.number("-n", 1, Integer.MAX_VALUE);
        IbvDevice d = DeviceLookup.one(env, o.string("-d"), "rdma:asyncwatch");
        StringBuilder sb = new StringBuilder();
        env.withContext(d, "ibv_asyncwatch", (p, c) -> {
            sb.append(d.name()).append(": watching the async events of a context in pid ").append(p.pid()).append('\n');
            if (watch(sb, d, c, ms, max) == 0) {
                sb.append("no event within ").append(ms).append(" ms\n");
            }
            return null;
        });
        return sb.toString().stripTrailing();
    }

    /** Prints each event until {@code max} came, {@code ms} passed or the device went; how many came. */
    private static int watch(StringBuilder sb, IbvDevice d, IbvContext c, long ms, long max) throws InterruptedException {
        long deadline = System.nanoTime() + ms * 1_000_000L;
        int n = 0;
        while (n < max) {
            long left = deadline - System.nanoTime();
            IbvAsyncEvent e;
            try {
                e = left <= 0 ? null : c.getAsyncEvent(left, TimeUnit.NANOSECONDS);
            } catch (KernelException k) {
                sb.append("the device went away: ").append(k.errno()).append('\n'); // EIO after DEVICE_FATAL
                break;
            }
            if (e == null) {
                break;
            }
            n++;
            sb.append(String.format("event_type %s (%d), ", "IBV_EVENT_" + e.type(), e.type().ordinal()));
            sb.append(switch (e.type().element()) {
                case PORT -> "port_num " + e.portNum();
                case QP -> String.format("qp_num 0x%x", e.qp().qpNum());
                case DEVICE -> "device " + d.name();
                default -> e.type().str();
            }).append('\n');
        }
        return n;
    }
}
