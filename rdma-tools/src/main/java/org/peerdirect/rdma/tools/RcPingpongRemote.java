package org.peerdirect.rdma.tools;

import java.util.concurrent.ThreadLocalRandom;

import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;
import org.peerdirect.rdma.RcConnect;

/**
 * {@code rdma:pingpong --server | --client HOST}: one side of {@code ibv_rc_pingpong} in this
 * container, the other elsewhere, joined by {@link PingpongExch}. The side is rc_pingpong's
 * {@code main} after the exchange: the QP connected with rc_pingpong's attributes (path MTU 1024,
 * min_rnr_timer 12, timeout 14, retry_cnt 7, rnr_retry 7, one RDMA READ each way) from a random
 * PSN; {@code rx_depth} receives posted ahead; the client sends first; each side sends again when
 * its last send completed and a message arrived ({@code parse_single_wc}'s {@code pending}).
 *
 * <p>{@code -c}: the buffer holds rc_pingpong's pattern ({@code 0x7b}, the client's first byte of
 * every 4 KiB page 0, {@code i / page_size % sizeof(char)}); rc_pingpong's server checks those
 * bytes once at the end, this side checks every received buffer whole, on either side.
 */
final class RcPingpongRemote {

    private static final int RECV_WRID = 1;
    private static final int SEND_WRID = 2;
    private static final int PAGE = 4096;
    /** rc_pingpong's -m default, and what a 1500-byte Ethernet link carries (IBV_MTU_1024). */
    static final int MTU_1024 = 3;
    private static final int RX_DEPTH = 64;

    private final ToolEnv env;

    RcPingpongRemote(ToolEnv env) {
        this.env = env;
    }

    String run(Options o, Remote r, int size, int iters, boolean events, boolean validate, Buffers.Odp odp, PeerMemoryAllocator mem)
            throws InterruptedException {
        String tool = o.tool();
        IbvDevice dev = DeviceLookup.one(env, o.string("-d"), tool);
        try (Endpoint e = new Endpoint(env, "rc_pingpong-" + r.side(), dev, size, 1, RX_DEPTH, mem, events, odp, -1, false, 0)) {
            IbvPortAttr port = e.ctx.queryPort(1);
            int gidx = r.gidIndex(e.ctx, port);
            PingpongExch.Dest my = new PingpongExch.Dest(port.lid(), e.qps[0].qpNum(), ThreadLocalRandom.current().nextInt() & 0xffffff,
                    Remote.gid(e.ctx, gidx));
            StringBuilder out = new StringBuilder("  local address:  ").append(my.describe()).append('\n');
            fill(e, size, !r.server() && validate);
            // the receives go up once the QP is connected and before the peer can send: the server's
            // before it answers, the client's before its first send (rc_pingpong posts them at INIT)
            PingpongExch.Dest rem = r.server() ? PingpongExch.serverExchDest(tool, r.port(), my, d -> {
                connect(e, my, d, gidx);
                postRecvs(e, size, RX_DEPTH);
            }) : PingpongExch.clientExchDest(tool, r.host(), r.port(), my);
            out.append("  remote address: ").append(rem.describe()).append('\n');
            if (!r.server()) {
                connect(e, my, rem, gidx);
                postRecvs(e, size, RX_DEPTH);
            }
            long t0 = System.nanoTime();
            loop(e, size, iters, validate, !r.server(), RX_DEPTH, tool);
            long usec = Math.max(1, (System.nanoTime() - t0) / 1000);
            long bytes = (long) size * iters * 2;
            out.append(String.format("%d bytes in %.2f seconds = %.2f Mbit/sec%n", bytes, usec / 1e6, bytes * 8.0 / usec));
            out.append(String.format("%d iters in %.2f seconds = %.2f usec/iter", iters, usec / 1e6, (double) usec / iters));
            if (validate) {
                out.append(String.format("%nvalidated %d received buffers of %d bytes (ibv_rc_pingpong -c's pattern): no mismatch", iters, size));
            }
            return out.toString();
        }
    }

    /**
     * {@code pp_connect_ctx}: RTR towards {@code rem} (by GID when its interface id is set), RTS from {@code my}'s PSN.
     * The QP grants no remote access, as {@code pp_init_ctx}'s {@code qp_access_flags = 0}: only SENDs reach it, and an
     * RDMA request to it is an invalid request on either side of a wire.
     */
    static void connect(Endpoint e, PingpongExch.Dest my, PingpongExch.Dest rem, int gidx) {
        RcConnect c = new RcConnect().access(0).minRnrTimer(12).timeout(14, 7).rnrRetry(7).rdAtomic(1).pathMtu(MTU_1024)
                .psn(my.psn(), rem.psn());
        if (rem.global()) {
            c.gid(rem.gid(), Math.max(0, gidx));
        }
        c.connect(e.qps[0], rem.lid(), rem.qpn());
    }

    /** rc_pingpong's buffer: {@code memset(buf, 0x7b, size)}, and with {@code -c} on the client the first byte of each page 0. */
    static void fill(Endpoint e, int size, boolean marks) {
        e.write(e.buf, expected(size, marks), 0, size);
    }

    static byte[] expected(int size, boolean marks) {
        byte[] b = new byte[size];
        java.util.Arrays.fill(b, (byte) 0x7b);
        if (marks) {
            for (int i = 0; i < size; i += PAGE) {
                b[i] = 0; // i / page_size % sizeof(char)
            }
        }
        return b;
    }

    private static int postRecvs(Endpoint e, int size, int n) {
        IbvRecvWr w = new IbvRecvWr().sge(e.buf, size, e.mr.lkey());
        w.wrId = RECV_WRID;
        for (int i = 0; i < n; i++) {
            e.qps[0].postRecv(w);
        }
        return n;
    }

    /**
     * rc_pingpong's loop: until {@code iters} sends and {@code iters} receives completed; a send
     * goes when nothing is pending; receives are topped up to {@code rx_depth} when one is left.
     */
    private static void loop(Endpoint e, int size, int iters, boolean validate, boolean client, int routs, String tool) {
        IbvSendWr swr = new IbvSendWr().sge(e.buf, size, e.mr.lkey());
        swr.opcode = IbvWrOpcode.SEND;
        swr.sendFlags = IbvSendWr.SEND_SIGNALED;
        swr.wrId = SEND_WRID;
        byte[] want = validate ? expected(size, true) : null;
        byte[] got = validate ? new byte[size] : null;
        IbvWc[] wc = {new IbvWc()};
        int pending = RECV_WRID;
        if (client) {
            e.qps[0].postSend(swr);
            pending |= SEND_WRID;
        }
        int scnt = 0;
        int rcnt = 0;
        String who = tool + " " + (client ? "client" : "server");
        while (rcnt < iters || scnt < iters) {
            IbvWc c = e.channel != null ? Completions.waitEvent(e, wc, who) : Completions.waitOk(e.cq, wc, who);
            if (c.opcode == IbvWcOpcode.RECV) {
                if (--routs <= 1) {
                    routs += postRecvs(e, size, RX_DEPTH - routs);
                }
                if (validate) {
                    e.read(e.buf, got, 0, size);
                    if (!java.util.Arrays.equals(want, got)) {
                        throw new IllegalStateException(who + ": invalid data in the buffer received at iteration " + rcnt
                                + " (the peer's -c pattern: 0x7b, the first byte of each 4 KiB page 0)");
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
