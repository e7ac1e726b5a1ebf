package org.peerdirect.rdma.tools;

import java.util.List;

import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.shell.UsageException;

/**
 * Which devices a tool runs on: {@code -d} names the client's (default the first), and the server,
 * which on real hosts is the other end of the cable, is the next device on the same network.
 */
final class DeviceLookup {

    /** The client's device and the server's (the same device for loopback). */
    record Pair(IbvDevice client, IbvDevice server) {
    }

    private DeviceLookup() {
    }

    /** The devices {@code -d} selects: the one named, or every device (ibv_devinfo without -d). */
    static List<IbvDevice> selected(ToolEnv env, String name) {
        return name == null ? env.devices().devices() : List.of(env.devices().device(name));
    }

    /** The device {@code -d} names, or the first; a usage error naming the tool when there is none. */
    static IbvDevice one(ToolEnv env, String name, String tool) {
        return name != null ? env.devices().device(name) : env.devices().devices().stream().findFirst()
                .orElseThrow(() -> new UsageException(tool + ": no IB devices found"));
    }

    /**
     * The client device and the server's: the next device in the list whose port 1 has the same
     * link layer (an InfiniBand port and an Ethernet port are on two networks, as two real hosts
     * would be cabled), or the client device itself (loopback) when there is no other.
     */
    static Pair pair(ToolEnv env, Options o) {
        return pair(env, o, 0, 0);
    }

    /**
     * The client device and a server: the next device with the same link layer that reports every
     * {@code device_cap_flags_ex} bit of {@code needCaps} and every {@code device_cap_flags} bit of
     * {@code needFlags}, or the client itself (loopback). EOPNOTSUPP when the client lacks them.
     */
    static Pair pair(ToolEnv env, Options o, long needCaps, long needFlags) {
        IbvDevice client = env.devices().device(o.string("-d"));
        List<IbvDevice> all = env.devices().devices();
        long[] cc = probe(env, client);
        if ((cc[1] & needCaps) != needCaps || (cc[2] & needFlags) != needFlags) {
            throw new KernelException(KernelException.Errno.EOPNOTSUPP, String.format(
                    "%s does not report device_cap_flags 0x%x / device_cap_flags_ex 0x%x (rdma:devinfo -v shows what each device reports)",
                    client.name(), needFlags, needCaps));
        }
        int at = all.indexOf(client);
        for (int i = 1; i < all.size(); i++) {
            IbvDevice d = all.get((at + i) % all.size());
            long[] dc = probe(env, d);
            if (dc[0] == cc[0] && (dc[1] & needCaps) == needCaps && (dc[2] & needFlags) == needFlags) {
                return new Pair(client, d);
            }
        }
        return new Pair(client, client);
    }

    /**
     * Port 1's link layer, the device's {@code device_cap_flags_ex} and {@code device_cap_flags},
     * through a short-lived process's context (zeros when the device went).
     */
    private static long[] probe(ToolEnv env, IbvDevice d) {
        try {
            return env.withContext(d, "rdma-probe", (p, c) -> {
                IbvDeviceAttr a = c.queryDeviceEx();
                return new long[] {c.queryPort(1).linkLayer(), a.deviceCapFlagsEx(), a.deviceCapFlags() & 0xffff_ffffL};
            });
        } catch (RuntimeException gone) {
            return new long[3];
        }
    }
}
