package org.peerdirect.rdma.tools;

import java.util.List;

import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.kernel.shell.UsageException;

/**
 * One side of a tool on this host, the other elsewhere (another peerdirect container, or the C
 * program on a Linux host such as the rxe guest): {@code --server} listens on {@code -p} for the
 * other side's out-of-band TCP, {@code --client HOST} connects to it. Without either, a tool runs
 * both sides here, as it always did.
 *
 * @param server     this side listens ({@code --server}); else it is the client of {@link #host}
 * @param host       the server's host for the client, null for the server
 * @param port       the out-of-band TCP port ({@code -p}, default 18515)
 * @param gidIndex   the local GID index the peer is addressed from ({@code -g}/{@code -x}), -1: by LID
 */
record Remote(boolean server, String host, int port, int gidIndex) {

    /**
     * The options every tool that runs across hosts declares; {@code gidOpt} is {@code -g}
     * (rdma-core) or {@code -x} (perftest), null when the tool has its own GID option already.
     */
    static List<Options.Opt> options(String gidOpt) {
        List<Options.Opt> l = new java.util.ArrayList<>(List.of(Options.flag("--server", "run only the server side here: listen on -p for the "
                + "client, which runs elsewhere (the C tool, or rdma:* in another container)"),
                Options.value("--client", "HOST", "run only the client side here, towards the server on HOST (port -p)", null),
                Options.value("-p", "PORT", "with --server/--client: the out-of-band TCP port", OobSocket.DEFAULT_PORT)));
        if (gidOpt != null) {
            l.add(Options.value(gidOpt, "GIDIDX", "with --server/--client: the local GID index the peer is addressed from (a GRH; needed on "
                    + "RoCE); default: by LID on InfiniBand, the first IPv4-mapped GID on Ethernet", -1));
        }
        return l;
    }

    /**
     * The remote mode {@code o} asks for, or null for a run of both sides here. Options that only
     * make sense with two local sides ({@code localOnly}, e.g. {@code --server-dev}) are refused
     * with it, naming them; {@code -p} without it too, and the GID index when
     * {@code gidRemoteOnly} (a tool whose own GID option serves both modes passes false).
     */
    static Remote of(Options o, String gidOpt, boolean gidRemoteOnly, List<String> localOnly) {
        boolean server = o.flag("--server");
        String host = o.string("--client");
        o.conflict("--server", "--client", "one side runs here: the server (--server) or the client of HOST (--client HOST)");
        if (!server && host == null) {
            for (String r : gidRemoteOnly ? List.of("-p", gidOpt) : List.of("-p")) {
                if (o.given(r)) {
                    throw new UsageException(o.tool() + ": option " + r + " applies to a run across hosts: give --server or --client HOST too");
                }
            }
            return null;
        }
        for (String l : localOnly) {
            if (o.given(l)) {
                throw new UsageException(o.tool() + ": option " + l + " is not supported with " + (server ? "--server" : "--client")
                        + ": one side runs here, the other side's options are its own");
            }
        }
        return new Remote(server, host, (int) o.number("-p", 1, 65535), (int) o.number(gidOpt, -1, 255));
    }

    String side() {
        return server ? "server" : "client";
    }

    /**
     * The GID index to address the peer from: {@link #gidIndex} when given; else -1 (by LID) on
     * InfiniBand and, on Ethernet, where a LID means nothing, the first IPv4-mapped GID of port 1
     * (RoCE v2, as perftest picks one) or index 0.
     */
    int gidIndex(IbvContext c, IbvPortAttr port) {
        if (gidIndex >= 0 || port.linkLayer() != IbvPortAttr.LINK_LAYER_ETHERNET) {
            return gidIndex;
        }
        for (int i = 0; i < Math.min(16, port.gidTblLen()); i++) {
            try {
                byte[] g = IbvGid.parse(c.queryGid(1, i));
                if (v4Mapped(g)) {
                    return i;
                }
            } catch (RuntimeException unset) {
                break; // past the table's entries
            }
        }
        return 0;
    }

    /** {@code ::ffff:a.b.c.d}: a RoCE v2 GID of an IPv4 address. */
    static boolean v4Mapped(byte[] g) {
        for (int i = 0; i < 10; i++) {
            if (g[i] != 0) {
                return false;
            }
        }
        return g[10] == (byte) 0xff && g[11] == (byte) 0xff;
    }

    /** Port 1's GID at {@code idx}, or 16 zero bytes for -1 (as the C tools send when they address by LID). */
    static byte[] gid(IbvContext c, int idx) {
        return idx < 0 ? new byte[16] : IbvGid.parse(c.queryGid(1, idx));
    }
}
