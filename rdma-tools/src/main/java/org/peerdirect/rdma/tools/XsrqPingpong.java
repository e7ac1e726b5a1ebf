package org.peerdirect.rdma.tools;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.ib.core.verbs.IbvSrqInitAttrEx;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.IbvXrcd;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.rdma.RcConnect;

/**
 * {@code rdma:xsrq_pingpong}: SEND/RECV ping-pong over XRC, as {@code ibv_xsrq_pingpong} (rdma-core
 * {@code libibverbs/examples/xsrq_pingpong.c}): one XRC SRQ at the server receives every client's
 * messages through one XRC receive QP per client, and each client has its own domain and SRQ.
 */
final class XsrqPingpong {

    static final String DESCRIPTION = "SEND/RECV ping-pong over XRC, as ibv_xsrq_pingpong: one XRC SRQ at the server receives every client's "
            + "messages through one XRC receive QP per client. Example: rdma:xsrq_pingpong -d mlx5_1 -c 3 -n 100";

    private final ToolEnv env;

    XsrqPingpong(ToolEnv env) {
        this.env = env;
    }

    /** One side: a process with its XRC domain, one XRC SRQ, and per peer a receive QP and a send QP. */
    private static final class XrcSide implements AutoCloseable {
        final AddressSpace proc;
        final IbvContext ctx;
        final IbvPd pd;
        final IbvXrcd xrcd;
        final IbvCq recvCq;
        final IbvCq sendCq;
        final IbvSrq srq;
        final IbvQp[] recvQps;
        final IbvQp[] sendQps;
        final long buf;
        final long len;
        final IbvMr mr;
        final int lid;
        /** Port 1's GID 0 on RoCE (what a peer's path names there); null on InfiniBand, where the LID routes. */
        final byte[] gid;

        XrcSide(ToolEnv env, String name, IbvDevice dev, int peers, int slot, int access) {
            proc = env.process(name);
            try {
                ctx = dev.open(proc);
                pd = ctx.allocPd();
                xrcd = ctx.openXrcd(-1, 0);
                recvCq = ctx.createCq(4 * peers + 16, null);
                sendCq = ctx.createCq(4 * peers + 16, null);
                IbvSrqInitAttrEx s = new IbvSrqInitAttrEx();
                s.srqType = IbvSrqInitAttrEx.SrqType.XRC;
                s.pd = pd;
                s.xrcd = xrcd;
                s.cq = recvCq;
                s.maxWr = 2 * peers + 2;
                srq = ctx.createSrqEx(s);
                recvQps = new IbvQp[peers];
                sendQps = new IbvQp[peers];
                for (int i = 0; i < peers; i++) {
                    IbvQpInitAttr r = new IbvQpInitAttr();
                    r.qpType = IbvQpType.XRC_RECV;
                    r.xrcd = xrcd;
                    recvQps[i] = ctx.createQpEx(r);
                    IbvQpInitAttr q = new IbvQpInitAttr();
                    q.qpType = IbvQpType.XRC_SEND;
                    q.sendCq = sendCq;
                    q.maxSendWr = 4;
                    sendQps[i] = pd.createQp(q);
                }
                // one slot per peer to receive into, one to send from
                len = (long) (peers + 1) * slot;
                buf = Buffers.host(proc, len, false, (access & IbAccess.ON_DEMAND) != 0);
                mr = pd.regMr(buf, len, access);
                lid = ctx.queryPort(1).lid();
                gid = ctx.queryPort(1).linkLayer() == IbvPortAttr.LINK_LAYER_ETHERNET ? IbvGid.parse(ctx.queryGid(1, 0)) : null;
            } catch (RuntimeException e) {
                proc.exit();
                throw e;
            }
        }

        @Override
        public void close() {
            proc.exit(); // closes the context: QPs, SRQ, MR, domain, CQs, PD in uverbs' order
        }
    }

    /** The XRC ODP bits both ends need: SEND from their buffers, receives into XRC SRQs. */
    private static final int XRC_ODP = IbvDeviceAttr.OdpCaps.SUPPORT_SEND | IbvDeviceAttr.OdpCaps.SUPPORT_SRQ_RECV;

    String run(Object[] args) {
        Options o = new Options("rdma:xsrq_pingpong", "SEND/RECV ping-pong over XRC, as ibv_xsrq_pingpong", args, List.of(
                Options.value("-s", "SIZE", "message size in bytes", 4096),
                Options.value("-n", "ITERS", "round trips per client", 5),
                Options.value("-c", "CLIENTS", "client processes, each with its own XRC domain and SRQ", 2),
                Options.value("-d", "DEVICE", DeviceLookup.CLIENT_DEV, null),
                DeviceLookup.serverOption(),
                Options.flag("-o", "use on-demand paging (ODP) for both sides' buffers (needs XRC SEND and SRQ_RECV ODP)")));
        if (o.help()) {
            return o.printUsage();
        }
        int size = (int) o.number("-s", 1, 1 << 20);
        int iters = (int) o.number("-n", 1, 10_000_000);
        int clients = (int) o.number("-c", 1, 64);
        boolean odp = o.flag("-o");
        DeviceLookup.Needs needs = DeviceLookup.Needs.NONE.caps(0, IbvDeviceAttr.DEVICE_XRC);
        DeviceLookup.Pair p = DeviceLookup.pair(env, o, odp ? needs.xrcOdp(XRC_ODP) : needs);
        int access = IbAccess.LOCAL_WRITE | (odp ? IbAccess.ON_DEMAND : 0);
        if (odp) {
            for (IbvDevice d : List.of(p.client(), p.server())) {
                checkXrcOdp(d);
            }
        }
        int slot = (size + 4095) & -4096;
        List<XrcSide> opened = new ArrayList<>();
        try {
            XrcSide server = new XrcSide(env, "xsrq_pingpong-server", p.server(), clients, slot, access);
            opened.add(server);
            XrcSide[] cs = new XrcSide[clients];
            for (int c = 0; c < clients; c++) {
                cs[c] = new XrcSide(env, "xsrq_pingpong-client" + c, p.client(), 1, slot, access);
                opened.add(cs[c]);
                // client c's send QP to the server's c-th receive QP, and back
                RcConnect toServer = new RcConnect().minRnrTimer(1).gid(server.gid);
                RcConnect toClient = new RcConnect().minRnrTimer(1).gid(cs[c].gid);
                toServer.connect(cs[c].sendQps[0], server.lid, server.recvQps[c].qpNum());
                toClient.connect(server.recvQps[c], cs[c].lid, cs[c].sendQps[0].qpNum());
                toClient.connect(server.sendQps[c], cs[c].lid, cs[c].recvQps[0].qpNum());
                toServer.connect(cs[c].recvQps[0], server.lid, server.sendQps[c].qpNum());
            }
            return pingpong(server, cs, size, iters, odp);
        } finally {
            for (int i = opened.size() - 1; i >= 0; i--) {
                opened.get(i).close();
            }
        }
    }

    /** The XRC transport's SEND and SRQ_RECV ODP bits (xsrq_pingpong -o's check); EOPNOTSUPP naming the device. */
    private void checkXrcOdp(IbvDevice d) {
        int need = XRC_ODP;
        int have = env.withContext(d, "rdma-probe", (p, c) -> c.queryDeviceEx().odpCaps().xrcOdpCaps());
        if ((have & need) != need) {
            throw new KernelException(KernelException.Errno.EOPNOTSUPP, d.name() + ": xrc_odp_caps lack SEND and SRQ_RECV (rdma:devinfo -v)");
        }
    }

    /**
     * The exchange: each round, every client sends to the server's SRQ (its number from
     * {@code ibv_get_srq_num}) and the server answers each into that client's SRQ; the server
     * tells the clients apart by the receive completion's QP number (its receive QP per client).
     */
    private static String pingpong(XrcSide server, XrcSide[] cs, int size, int iters, boolean odp) {
        int clients = cs.length;
        int slot = (size + 4095) & -4096;
        IbvWc[] wc = {new IbvWc()};
        StringBuilder out = new StringBuilder();
        out.append(String.format("  server: LID 0x%04x, XRC SRQ 0x%06x, %d receive QPs, %d send QPs%s%n", server.lid, server.srq.srqNum(),
                clients, clients, odp ? ", ODP" : ""));
        for (int c = 0; c < clients; c++) {
            out.append(String.format("  client %d: LID 0x%04x, XRC SRQ 0x%06x, receive QP 0x%06x, send QP 0x%06x%n", c, cs[c].lid,
                    cs[c].srq.srqNum(), cs[c].recvQps[0].qpNum(), cs[c].sendQps[0].qpNum()));
        }
        long t0 = System.nanoTime();
        int[] perQp = new int[clients];
        for (int i = 0; i < iters; i++) {
            for (int c = 0; c < clients; c++) {
                server.srq.postRecv(new IbvRecvWr().sge(server.buf + (long) c * slot, size, server.mr.lkey()));
                cs[c].srq.postRecv(new IbvRecvWr().sge(cs[c].buf, size, cs[c].mr.lkey()));
            }
            clientsSend(server, cs, size, slot, i, wc);
            for (int k = 0; k < clients; k++) {
                IbvWc r = Completions.waitOk(server.recvCq, wc, "server receive");
                int c = indexOf(server.recvQps, r.qpNum);
                if (c < 0 || r.byteLen != size) {
                    throw new IllegalStateException(String.format("iteration %d: a receive on QP 0x%x of %d bytes: no client's", i, r.qpNum, r.byteLen));
                }
                perQp[c]++;
            }
            serverEchoes(server, cs, size, slot, i, wc);
            if (odp) { // every page re-faults next round, on both devices
                server.proc.madvise(server.buf, server.len, AddressSpace.Advice.MADV_DONTNEED);
                for (XrcSide c : cs) {
                    c.proc.madvise(c.buf, c.len, AddressSpace.Advice.MADV_DONTNEED);
                }
            }
        }
        long usec = Math.max(1, (System.nanoTime() - t0) / 1000);
        out.append(String.format("%d iters of %d clients in %.2f seconds = %.2f usec/iter%n", iters, clients, usec / 1e6, (double) usec / iters));
        out.append(String.format("validated %d received buffers; the server's one XRC SRQ took %s messages (per receive QP)%n",
                2L * iters * clients, Arrays.toString(perQp)));
        return out.toString();
    }

    /** Round {@code i}: each client sends its message to the server's SRQ from its send slot. */
    private static void clientsSend(XrcSide server, XrcSide[] cs, int size, int slot, int i, IbvWc[] wc) {
        byte[] msg = new byte[size];
        for (int c = 0; c < cs.length; c++) {
            fillPattern(msg, i, c);
            cs[c].proc.write(cs[c].buf + slot, msg, 0, size);
            IbvSendWr w = new IbvSendWr().sge(cs[c].buf + slot, size, cs[c].mr.lkey());
            w.opcode = IbvWrOpcode.SEND;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteSrqn = server.srq.srqNum();
            cs[c].sendQps[0].postSend(w);
            Completions.waitOk(cs[c].sendCq, wc, "client " + c + " send");
        }
    }

    /**
     * Round {@code i}: the server finds each client's message among its receive slots (the SRQ
     * took the receives in its own order) and echoes it into that client's SRQ through its send
     * QP to the client; the client checks the echo.
     */
    private static void serverEchoes(XrcSide server, XrcSide[] cs, int size, int slot, int i, IbvWc[] wc) {
        int clients = cs.length;
        byte[] msg = new byte[size];
        byte[] got = new byte[size];
        for (int c = 0; c < clients; c++) {
            fillPattern(msg, i, c);
            boolean found = false;
            for (int s = 0; s < clients && !found; s++) {
                server.proc.read(server.buf + (long) s * slot, got, 0, size);
                found = Arrays.equals(got, msg);
            }
            if (!found) {
                throw new IllegalStateException("iteration " + i + ": client " + c + "'s message is in no server receive buffer");
            }
            server.proc.write(server.buf + (long) clients * slot, msg, 0, size);
            IbvSendWr w = new IbvSendWr().sge(server.buf + (long) clients * slot, size, server.mr.lkey());
            w.opcode = IbvWrOpcode.SEND;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteSrqn = cs[c].srq.srqNum();
            server.sendQps[c].postSend(w);
            Completions.waitOk(server.sendCq, wc, "server send to client " + c);
            IbvWc r = Completions.waitOk(cs[c].recvCq, wc, "client " + c + " receive");
            cs[c].proc.read(cs[c].buf, got, 0, size);
            if (r.qpNum != cs[c].recvQps[0].qpNum() || !Arrays.equals(got, msg)) {
                throw new IllegalStateException("iteration " + i + ": client " + c + " received something else than its echo");
            }
        }
    }

    private static void fillPattern(byte[] msg, int i, int c) {
        for (int k = 0; k < msg.length; k++) {
            msg[k] = (byte) (i * 31 + c * 7 + k);
        }
    }

    private static int indexOf(IbvQp[] qps, int qpn) {
        for (int i = 0; i < qps.length; i++) {
            if (qps[i].qpNum() == qpn) {
                return i;
            }
        }
        return -1;
    }
}
