package org.peerdirect.rdma.tools;

import java.util.List;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr.OdpCaps;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.shell.UsageException;

/**
 * Which devices a tool runs on: {@code -d} names the client's (default the first). The server, on
 * real hosts the other end of the cable, is {@code --server-dev} when given, else the next device
 * on the same network that can serve the request ({@link Needs}: link layer, capability flags,
 * ODP, dma-buf), else the client's device itself: loopback through its port, as
 * {@code ibv_rc_pingpong -d mlx5_0} runs server and client on the one NIC of a host.
 */
final class DeviceLookup {

    /** The client's device and the server's (the same device for loopback). */
    record Pair(IbvDevice client, IbvDevice server) {
    }

    /** {@code --server-dev}: every tool that runs two ends declares it the same way. */
    static Options.Opt serverOption() {
        return Options.value("--server-dev", "DEVICE", "server device (default: the next device of DEVICE's link layer "
                + "that can serve the run, else DEVICE itself: loopback)", null);
    }

    /** The description of {@code -d} for the tools that run two ends. */
    static final String CLIENT_DEV = "client device (rdma:devices; default the first)";

    /**
     * What a run needs of the server's device besides the client's link layer: every
     * {@code device_cap_flags_ex} bit of {@code capsEx}, every {@code device_cap_flags} bit of
     * {@code capFlags}, every {@code odp_caps.general_caps} bit of {@code odpGeneral}, every ODP
     * transport bit of {@code rcOdp} (RC) and {@code xrcOdp} (XRC), and {@code ibv_reg_dmabuf_mr}.
     */
    record Needs(long capsEx, long capFlags, long odpGeneral, int rcOdp, int xrcOdp, boolean dmabuf) {
        static final Needs NONE = new Needs(0, 0, 0, 0, 0, false);

        Needs caps(long ex, long flags) {
            return new Needs(capsEx | ex, capFlags | flags, odpGeneral, rcOdp, xrcOdp, dmabuf);
        }

        /** On-demand paging over RC for the operations {@code rcBits}, implicit ({@code ODP_SUPPORT_IMPLICIT}) or not. */
        Needs rcOdp(boolean implicit, int rcBits) {
            return new Needs(capsEx, capFlags, odpGeneral | IbvDeviceAttr.ODP_SUPPORT | (implicit ? IbvDeviceAttr.ODP_SUPPORT_IMPLICIT : 0),
                    rcOdp | rcBits, xrcOdp, dmabuf);
        }

        Needs xrcOdp(int xrcBits) {
            return new Needs(capsEx, capFlags, odpGeneral | IbvDeviceAttr.ODP_SUPPORT, rcOdp, xrcOdp | xrcBits, dmabuf);
        }

        Needs dmabuf(boolean on) {
            return new Needs(capsEx, capFlags, odpGeneral, rcOdp, xrcOdp, dmabuf || on);
        }

        /** Whether a device {@code d} probed as {@code c} serves the run. */
        boolean servedBy(Caps c) {
            OdpCaps odp = c.attr.odpCaps();
            return (c.attr.deviceCapFlagsEx() & capsEx) == capsEx && (c.attr.deviceCapFlags() & 0xffff_ffffL & capFlags) == capFlags
                    && (odp.generalCaps() & odpGeneral) == odpGeneral && (odp.rcOdpCaps() & rcOdp) == rcOdp
                    && (odp.xrcOdpCaps() & xrcOdp) == xrcOdp && (!dmabuf || c.dmabuf);
        }
    }

    /** What a probe of one device found: port 1's link layer, the attributes, {@code ibv_reg_dmabuf_mr} support. */
    record Caps(int linkLayer, IbvDeviceAttr attr, boolean dmabuf) {
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

    /** {@link #pair(ToolEnv, Options, Needs)} for a run that needs nothing beyond the link layer. */
    static Pair pair(ToolEnv env, Options o) {
        return pair(env, o, Needs.NONE);
    }

    /**
     * The client device ({@code -d}) and the server's: {@code --server-dev} if given (it must share
     * the client's link layer: another network has no path to it), else the next device in the list
     * with the same link layer that serves {@code needs}, else the client itself (loopback). The
     * client's capability flags are checked here (EOPNOTSUPP naming them); its ODP and dma-buf
     * support are left to the verbs, whose errors name the device and the missing capability.
     */
    static Pair pair(ToolEnv env, Options o, Needs needs) {
        IbvDevice client = env.devices().device(o.string("-d")); // null: the first
        List<IbvDevice> all = env.devices().devices();
        Caps cc = probe(env, client, false); // its dma-buf support is the verbs' to report, naming it
        if ((cc.attr().deviceCapFlagsEx() & needs.capsEx()) != needs.capsEx()
                || (cc.attr().deviceCapFlags() & 0xffff_ffffL & needs.capFlags()) != needs.capFlags()) {
            throw new KernelException(KernelException.Errno.EOPNOTSUPP, String.format(
                    "%s does not report device_cap_flags 0x%x / device_cap_flags_ex 0x%x (rdma:devinfo -v shows what each device reports)",
                    client.name(), needs.capFlags(), needs.capsEx()));
        }
        String named = o.string("--server-dev");
        if (named != null) {
            IbvDevice server = env.devices().device(named);
            Caps sc = probe(env, server, false);
            if (sc.linkLayer() != cc.linkLayer()) {
                throw new UsageException(String.format("%s: --server-dev %s is on %s and %s on %s: no path between them",
                        o.tool(), named, linkLayer(sc.linkLayer()), client.name(), linkLayer(cc.linkLayer())));
            }
            return new Pair(client, server);
        }
        int at = all.indexOf(client);
        for (int i = 1; i < all.size(); i++) {
            IbvDevice d = all.get((at + i) % all.size());
            Caps dc = probe(env, d, needs.dmabuf());
            if (dc.linkLayer() == cc.linkLayer() && needs.servedBy(dc)) {
                return new Pair(client, d);
            }
        }
        return new Pair(client, client);
    }

    private static String linkLayer(int ll) {
        return switch (ll) {
            case IbvPortAttr.LINK_LAYER_INFINIBAND -> "InfiniBand";
            case IbvPortAttr.LINK_LAYER_ETHERNET -> "Ethernet";
            default -> "unknown (" + ll + ")";
        };
    }

    /**
     * Port 1's link layer and the device's attributes through a short-lived process's context;
     * with {@code dmabuf}, whether {@code ibv_reg_dmabuf_mr} is implemented (the kernel answers
     * EOPNOTSUPP before it looks at any argument when the driver lacks it; with it, the invalid fd
     * given here is refused otherwise). Nothing served when the device went.
     */
    static Caps probe(ToolEnv env, IbvDevice d, boolean dmabuf) {
        try {
            return env.withContext(d, "rdma-probe", (p, c) -> {
                boolean db = false;
                if (dmabuf) {
                    IbvPd pd = c.allocPd();
                    try {
                        pd.regDmabufMr(0, 4096, 0, -1, IbAccess.LOCAL_WRITE).dereg();
                        db = true;
                    } catch (KernelException e) {
                        db = e.errno() != KernelException.Errno.EOPNOTSUPP;
                    } finally {
                        pd.dealloc();
                    }
                }
                return new Caps(c.queryPort(1).linkLayer(), c.queryDeviceEx(), db);
            });
        } catch (RuntimeException gone) {
            return new Caps(-1, new IbvDeviceAttr(null, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, OdpCaps.NONE), false);
        }
    }
}
