package org.peerdirect.rdma.tools;

import java.util.Arrays;
import java.util.List;

import org.peerdirect.ib.core.verbs.IbvAh;
import org.peerdirect.ib.core.verbs.IbvAhAttr;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/**
 * {@code rdma:ud_pingpong}: SEND/RECV ping-pong on UD QPs through address handles, as
 * {@code ibv_ud_pingpong} (rdma-core {@code libibverbs/examples/ud_pingpong.c}): every receive
 * buffer starts with the 40 bytes a GRH takes, present or not.
 */
final class UdPingpong {

    static final String DESCRIPTION = "SEND/RECV ping-pong on UD QPs through address handles, as ibv_ud_pingpong (-g: a GRH to the peer's GID, "
            + "required on RoCE). Example: rdma:ud_pingpong -d mlx5_1 -g 0 -c";

    /** The Q_Key both sides use (ibv_ud_pingpong's 0x11111111). */
    static final int UD_QKEY = 0x11111111;
    /** The room a GRH takes at the head of every UD receive buffer. */
    private static final int GRH = 40;

    private final ToolEnv env;

    UdPingpong(ToolEnv env) {
        this.env = env;
    }

    String run(Object[] args) {
        Options o = new Options("rdma:ud_pingpong", "SEND/RECV ping-pong on UD QPs, as ibv_ud_pingpong", args, List.of(
                Options.value("-s", "SIZE", "message size in bytes, at most the path MTU (4096)", 1024),
                Options.value("-n", "ITERS", "round trips", 1000),
                Options.value("-d", "DEVICE", DeviceLookup.CLIENT_DEV, null),
                DeviceLookup.serverOption(),
                Options.value("-g", "GIDIDX", "local port GID index: address the peer by GID (a GRH on every datagram; needed on RoCE); -1: by LID", -1),
                Options.flag("-c", "validate every received buffer")), Remote.options(null));
        if (o.help()) {
            return o.printUsage();
        }
        int size = (int) o.number("-s", 1, 4096);
        int iters = (int) o.number("-n", 1, 100_000_000);
        int gidx = (int) o.number("-g", -1, 255);
        boolean validate = o.flag("-c");
        Remote remote = Remote.of(o, "-g", false, List.of("--server-dev"));
        if (remote != null) { // one side here, the other elsewhere: ibv_ud_pingpong's out-of-band exchange
            return new UdPingpongRemote(env).run(o, remote, size, iters, validate);
        }
        DeviceLookup.Pair p = DeviceLookup.pair(env, o);
        long len = (size + GRH + 4095L) & -4096L; // the payload after the 40 bytes a GRH takes
        try (Endpoint server = Endpoint.ud(env, "ud_pingpong-server", p.server(), len, 16, UD_QKEY);
                Endpoint client = Endpoint.ud(env, "ud_pingpong-client", p.client(), len, 16, UD_QKEY)) {
            IbvAh[] ahs = new IbvAh[2];
            try {
                return pingpong(client, server, ahs, size, iters, gidx, validate);
            } finally {
                for (IbvAh ah : ahs) {
                    if (ah != null) {
                        ah.destroy(); // before the PDs go
                    }
                }
            }
        }
    }

    /** The ping-pong: {@code ahs[0]} client to server, {@code ahs[1]} back, made here. */
    private static String pingpong(Endpoint client, Endpoint server, IbvAh[] ahs, int size, int iters, int gidx, boolean validate) {
        Endpoint[][] legs = {{client, server}, {server, client}};
        for (int k = 0; k < 2; k++) {
            ahs[k] = legs[k][0].pd.createAh(ahAttr(legs[k][1], gidx));
        }
        StringBuilder out = new StringBuilder();
        for (Endpoint sd : List.of(client, server)) {
            out.append(sd == client ? "  local address:  " : "  remote address: ").append(String.format("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s%n",
                    sd.lid, sd.qps[0].qpNum(), 0, gidx >= 0 ? sd.ctx.queryGid(1, gidx) : "::"));
        }
        IbvWc[] wc = {new IbvWc()};
        byte[] msg = new byte[size];
        byte[] got = new byte[size];
        long t0 = System.nanoTime();
        int grh = 0;
        for (int i = 0; i < iters; i++) {
            for (Endpoint e : List.of(server, client)) {
                e.qps[0].postRecv(new IbvRecvWr().sge(e.buf, size + GRH, e.mr.lkey()));
            }
            for (int k = 0; k < size; k++) {
                msg[k] = (byte) (i * 31 + k);
            }
            client.proc.write(client.buf + GRH, msg, 0, size);
            for (int k = 0; k < 2; k++) {
                grh += leg(legs[k][0], legs[k][1], client, ahs[k], wc, size, i);
                if (validate) {
                    Endpoint to = legs[k][1];
                    to.proc.read(to.buf + GRH, got, 0, size);
                    if (!Arrays.equals(got, msg)) {
                        throw new IllegalStateException("iteration " + i + ": the received buffer differs from what was sent");
                    }
                }
            }
        }
        long usec = Math.max(1, (System.nanoTime() - t0) / 1000);
        long bytes = 2L * size * iters;
        out.append(String.format("%d bytes in %.2f seconds = %.2f Mbit/sec%n", bytes, usec / 1e6, bytes * 8.0 / usec));
        out.append(String.format("%d iters in %.2f seconds = %.2f usec/iter%n", iters, usec / 1e6, (double) usec / iters));
        out.append(String.format("%s%d datagrams arrived with a GRH (IBV_WC_GRH)%n", validate ? "validated " + 2L * iters + " received buffers; " : "",
                grh));
        return out.toString();
    }

    /** The address of {@code to}: by LID, or with {@code gidx} at least 0 by its GID (a GRH on every datagram). */
    private static IbvAhAttr ahAttr(Endpoint to, int gidx) {
        IbvAhAttr a = IbvAhAttr.lid(to.lid, 1);
        if (gidx >= 0) {
            a = IbvAhAttr.gid(IbvGid.parse(to.ctx.queryGid(1, gidx)), gidx, 1);
            a.dlid = to.lid;
            a.hopLimit = 1;
        }
        return a;
    }

    /** One datagram {@code from} → {@code to} through {@code ah}, both completions awaited; 1 if it arrived with a GRH. */
    private static int leg(Endpoint from, Endpoint to, Endpoint client, IbvAh ah, IbvWc[] wc, int size, int i) {
        IbvSendWr w = new IbvSendWr().sge(from.buf + GRH, size, from.mr.lkey());
        w.opcode = IbvWrOpcode.SEND;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.ah = ah;
        w.remoteQpn = to.qps[0].qpNum();
        w.remoteQkey = UD_QKEY;
        from.qps[0].postSend(w);
        Completions.waitOk(from.cq, wc, from == client ? "client send" : "server send");
        IbvWc r = Completions.waitOk(to.cq, wc, to == client ? "client receive" : "server receive");
        if (r.byteLen != size + GRH) {
            throw new IllegalStateException(String.format("iteration %d: received %d bytes, expected %d (GRH + payload)", i, r.byteLen, size + GRH));
        }
        return (r.wcFlags & IbvWc.WC_GRH) != 0 ? 1 : 0;
    }
}
