package org.peerdirect.rdma.tools;

import java.util.Arrays;
import java.util.concurrent.ThreadLocalRandom;

import org.peerdirect.ib.core.verbs.IbvAh;
import org.peerdirect.ib.core.verbs.IbvAhAttr;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.shell.UsageException;

/**
 * {@code rdma:ud_pingpong --server | --client HOST}: one side of {@code ibv_ud_pingpong}
 * ({@code libibverbs/examples/ud_pingpong.c}) here, the other elsewhere, joined by
 * {@link PingpongExch}: a UD QP with Q_Key 0x11111111 from a random PSN, an address handle to
 * the peer (by GID when its interface id is set; the server creates it before it answers, as
 * {@code pp_connect_ctx} there), buffers of size + 40 (the GRH's room), the client sending first
 * and each side sending again when its last send completed and a datagram arrived. {@code -c}
 * checks each received payload whole against ud_pingpong's pattern (0x7b, the client's first byte
 * of each 4 KiB page 0).
 */
final class UdPingpongRemote {

    private static final int GRH = 40;
    private static final int RX_DEPTH = 64;
    private static final int RECV_WRID = 1;
    private static final int SEND_WRID = 2;

    private final ToolEnv env;

    UdPingpongRemote(ToolEnv env) {
        this.env = env;
    }

    String run(Options o, Remote r, int size, int iters, boolean validate) {
        String tool = o.tool();
        IbvDevice dev = DeviceLookup.one(env, o.string("-d"), tool);
        int psn = ThreadLocalRandom.current().nextInt() & 0xffffff;
        long len = (size + GRH + 4095L) & -4096L;
        try (Endpoint e = Endpoint.ud(env, "ud_pingpong-" + r.side(), dev, len, RX_DEPTH, UdPingpong.UD_QKEY, psn)) {
            IbvPortAttr port = e.ctx.queryPort(1);
            int mtu = 1 << (port.activeMtu() + 7);
            if (size > mtu) {
                throw new UsageException(tool + ": Requested size larger than port MTU (" + mtu + ")");
            }
            int gidx = r.gidIndex(e.ctx, port);
            PingpongExch.Dest my = new PingpongExch.Dest(port.lid(), e.qps[0].qpNum(), psn, Remote.gid(e.ctx, gidx));
            StringBuilder out = new StringBuilder("  local address:  ").append(my.describe()).append('\n');
            e.write(e.buf + GRH, RcPingpongRemote.expected(size, !r.server() && validate), 0, size);
            IbvRecvWr rwr = new IbvRecvWr().sge(e.buf, size + GRH, e.mr.lkey());
            rwr.wrId = RECV_WRID;
            for (int i = 0; i < RX_DEPTH; i++) {
                e.qps[0].postRecv(rwr);
            }
            IbvAh[] ah = new IbvAh[1];
            try {
                PingpongExch.Dest rem = r.server() ? PingpongExch.serverExchDest(tool, r.port(), my, d -> ah[0] = e.pd.createAh(ahAttr(d, gidx)))
                        : PingpongExch.clientExchDest(tool, r.host(), r.port(), my);
                out.append("  remote address: ").append(rem.describe()).append('\n');
                if (ah[0] == null) {
                    ah[0] = e.pd.createAh(ahAttr(rem, gidx));
                }
                long t0 = System.nanoTime();
                loop(e, ah[0], rem.qpn(), rwr, size, iters, validate, !r.server(), tool);
                long usec = Math.max(1, (System.nanoTime() - t0) / 1000);
                long bytes = (long) size * iters * 2;
                out.append(String.format("%d bytes in %.2f seconds = %.2f Mbit/sec%n", bytes, usec / 1e6, bytes * 8.0 / usec));
                out.append(String.format("%d iters in %.2f seconds = %.2f usec/iter", iters, usec / 1e6, (double) usec / iters));
                if (validate) {
                    out.append(String.format("%nvalidated %d received payloads of %d bytes (ibv_ud_pingpong -c's pattern): no mismatch", iters, size));
                }
                return out.toString();
            } finally {
                if (ah[0] != null) {
                    ah[0].destroy(); // before the PD goes
                }
            }
        }
    }

    /** ud_pingpong's address handle: by LID, and with a GRH (hop limit 1) when the peer's GID has an interface id. */
    private static IbvAhAttr ahAttr(PingpongExch.Dest d, int gidx) {
        IbvAhAttr a = IbvAhAttr.lid(d.lid(), 1);
        if (d.global()) {
            a = IbvAhAttr.gid(d.gid(), Math.max(0, gidx), 1);
            a.dlid = d.lid();
            a.hopLimit = 1;
        }
        return a;
    }

    private static void loop(Endpoint e, IbvAh ah, int remQpn, IbvRecvWr rwr, int size, int iters, boolean validate, boolean client, String tool) {
        IbvSendWr swr = new IbvSendWr().sge(e.buf + GRH, size, e.mr.lkey());
        swr.opcode = IbvWrOpcode.SEND;
        swr.sendFlags = IbvSendWr.SEND_SIGNALED;
        swr.wrId = SEND_WRID;
        swr.ah = ah;
        swr.remoteQpn = remQpn;
        swr.remoteQkey = UdPingpong.UD_QKEY;
        byte[] want = validate ? RcPingpongRemote.expected(size, true) : null;
        byte[] got = validate ? new byte[size] : null;
        IbvWc[] wc = {new IbvWc()};
        String who = tool + " " + (client ? "client" : "server");
        int pending = RECV_WRID;
        if (client) {
            e.qps[0].postSend(swr);
            pending |= SEND_WRID;
        }
        int scnt = 0;
        int rcnt = 0;
        int routs = RX_DEPTH;
        while (rcnt < iters || scnt < iters) {
            IbvWc c = Completions.waitOk(e.cq, wc, who);
            if (c.opcode == IbvWcOpcode.RECV) {
                if (c.byteLen != size + GRH) {
                    throw new IllegalStateException(String.format("%s: received %d bytes, expected %d (GRH + payload)", who, c.byteLen, size + GRH));
                }
                if (validate) {
                    e.read(e.buf + GRH, got, 0, size);
                    if (!Arrays.equals(want, got)) {
                        throw new IllegalStateException(who + ": invalid data in the payload received at iteration " + rcnt
                                + " (the peer's -c pattern: 0x7b, the first byte of each 4 KiB page 0)");
                    }
                }
                if (--routs <= 1) {
                    for (; routs < RX_DEPTH; routs++) {
                        e.qps[0].postRecv(rwr);
                    }
                }
                rcnt++;
                pending &= ~RECV_WRID;
            } else {
                scnt++;
                pending &= ~SEND_WRID;
            }
            if (scnt < iters && pending == 0) {
                e.qps[0].postSend(swr);
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
}
