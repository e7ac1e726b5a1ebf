package org.peerdirect.rdma.tools;

import java.util.concurrent.ThreadLocalRandom;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;
import org.peerdirect.rdma.RcConnect;

/**
 * {@code rdma:write_bw} / {@code rdma:read_bw} {@code --server | --client HOST}: one side of
 * perftest's {@code ib_write_bw} / {@code ib_read_bw} here, the other elsewhere, joined by
 * {@link PerftestComm} in {@code write_bw.c}'s order. The server only lends its buffer (its
 * R_Key and address travel in the exchange) and waits for the client's end; the client runs
 * {@code run_iter_bw} against it, {@code -t} requests in flight per QP, every {@code min(100,-t)}-th
 * signalled, and sends its figures, which the server prints as perftest's server does.
 * QPs are connected as {@code ctx_connect} does: path MTU the smaller of both ports', PSNs from
 * the exchange, {@code max_dest_rd_atomic} this side's OUT_READS, {@code max_rd_atomic} the
 * peer's, timeout 14, retry_cnt 7, rnr_retry 7.
 */
final class PerftestRemote {

    /** The RDMA READs a QP takes in flight each way (perftest's OUT_READS on rxe and mlx5: 16 at most). */
    private static final int OUT_READS = 16;
    private static final String BW_HEADER = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
    private static final String LAT_HEADER = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
            + "99% percentile[usec]   99.9% percentile[usec] ";

    private final ToolEnv env;
    private final PerftestParameters p;

    PerftestRemote(ToolEnv env, PerftestParameters p) {
        this.env = env;
        this.p = p;
    }

    /** The three shapes of perftest's exchange and run: write_bw/read_bw, send_bw, write_lat. */
    private enum Kind {
        BW, SEND, LAT
    }

    private Kind kind() {
        return p.latency ? Kind.LAT : p.op == IbvWrOpcode.SEND ? Kind.SEND : Kind.BW;
    }

    String run(Remote r, PeerMemoryAllocator mem) {
        String tool = p.o.tool();
        Kind kind = kind();
        IbvDevice dev = DeviceLookup.one(env, p.o.string("-d"), tool);
        // one region per QP, each as large as perftest's (twice the message or the cycle buffer); write_lat's peer writes into a second one
        long per = 2L * Math.max(p.maxSize(), PerftestComm.CYCLE_BUFFER);
        long regions = kind == Kind.LAT ? 2L * p.qps : p.qps;
        Buffers.Odp odp = p.odp ? Buffers.Odp.EXPLICIT : Buffers.Odp.NONE;
        StringBuilder out = new StringBuilder();
        try (PerftestComm comm = PerftestComm.establish(tool, r);
                Endpoint e = new Endpoint(env, "perftest-" + r.side(), dev, per * regions, p.qps, p.depth, mem, false, odp, -1, p.dmabuf,
                        p.huge ? IbAccess.HUGETLB : 0)) {
            comm.exchangeVersions();
            comm.checkSysData();
            IbvPortAttr port = e.ctx.queryPort(1);
            int mtu = comm.checkMtu(port.activeMtu());
            int gidx = r.gidIndex(e.ctx, port);
            PerftestComm.Dest[] my = new PerftestComm.Dest[p.qps];
            for (int q = 0; q < p.qps; q++) {
                my[q] = new PerftestComm.Dest(port.lid(), OUT_READS, e.qps[q].qpNum(), ThreadLocalRandom.current().nextInt() & 0xffffff, e.mr.rkey(),
                        e.buf + (kind == Kind.LAT ? p.qps + q : q) * per, gidx >= 0 ? Remote.gid(e.ctx, gidx) : null, 0);
            }
            if (kind == Kind.LAT) {
                comm.handShake(my[0]); // write_lat.c shakes hands once before the per-QP records
            }
            PerftestComm.Dest[] rem = connect(comm, e, my, mtu, gidx, tool);
            if (kind == Kind.SEND) {
                comm.handShake(my[0]); // send_bw.c: once after ctx_connect
            }
            banner(out, dev, r, port, mtu, gidx, mem);
            for (int q = 0; q < p.qps; q++) {
                out.append(my[q].describe("local"));
            }
            for (int q = 0; q < p.qps; q++) {
                rem[q] = comm.handShake(my[q]);
                out.append(rem[q].describe("remote"));
            }
            out.append(PerftestReport.LINE).append('\n').append(kind == Kind.LAT ? LAT_HEADER : BW_HEADER).append('\n');
            switch (kind) {
                case BW -> bw(comm, r, e, my, rem, per, out);
                case SEND -> send(comm, r, e, my, rem, per, out);
                case LAT -> {
                    comm.handShake(my[0]); // "an additional handshake is required after moving qp to RTR"
                    out.append(runIterLatWrite(e, r.server(), per, rem[0])).append('\n'); // write_lat closes no connection: the socket just goes
                }
            }
            out.append(PerftestReport.LINE);
        }
        return out.toString();
    }

    /** The first per-QP records, then {@code ctx_connect}: each QP RESET → RTS towards the peer's. */
    private PerftestComm.Dest[] connect(PerftestComm comm, Endpoint e, PerftestComm.Dest[] my, int mtu, int gidx, String tool) {
        PerftestComm.Dest[] rem = new PerftestComm.Dest[p.qps];
        for (int q = 0; q < p.qps; q++) {
            rem[q] = comm.handShake(my[q]);
        }
        if (gidx >= 0 && Remote.v4Mapped(my[0].gid()) != Remote.v4Mapped(rem[0].gid())) {
            throw new IllegalStateException(tool + ": Found Incompatibility issue with GID types (one side IPv4-mapped, the other not): "
                    + "Please Try to use a different IP version (-x)");
        }
        for (int q = 0; q < p.qps; q++) {
            RcConnect c = new RcConnect().access(Endpoint.ACCESS).minRnrTimer(12).timeout(14, 7).rnrRetry(7).pathMtu(mtu)
                    .rdAtomic(OUT_READS, Math.min(OUT_READS, Math.max(1, rem[q].outReads()))).psn(my[q].psn(), rem[q].psn());
            if (gidx >= 0) {
                c.gid(rem[q].gid(), gidx);
            }
            c.connect(e.qps[q], rem[q].lid(), rem[q].qpn());
        }
        return rem;
    }

    /**
     * write_bw/read_bw after the records: the server waits for the client's end and prints the
     * figures it sends ({@code xchg_bw_reports}); the client runs each size, then sends them.
     */
    private void bw(PerftestComm comm, Remote r, Endpoint e, PerftestComm.Dest[] my, PerftestComm.Dest[] rem, long per, StringBuilder out) {
        comm.handShake(my[0]); // "an additional handshake is required after moving qp to RTR"
        if (r.server()) {
            comm.handShake(my[0]); // the server waits for the client's end
            PerftestComm.BwReport c = comm.xchgBwReports(new PerftestComm.BwReport(0, 0, 0, 0, 0));
            out.append(new PerftestResult.Bw((int) c.size(), (int) c.iters(), c.bwPeak(), c.bwAvg(), c.msgRate()).row()).append('\n');
        } else {
            PerftestComm.BwReport last = null;
            for (int s : p.sizes) {
                last = runIterBw(e, rem, per, s, p.itersFor(s));
                out.append(new PerftestResult.Bw(s, (int) last.iters(), last.bwPeak(), last.bwAvg(), last.msgRate()).row()).append('\n');
            }
            comm.handShake(my[0]);
            comm.xchgBwReports(last);
        }
        comm.close(my[0]);
    }

    /**
     * send_bw after the records: the server posts its receives ({@code ctx_set_recv_wqes}), a hand
     * shake starts the run, the client sends ({@code run_iter_bw}), the server receives
     * ({@code run_iter_bw_server}); each prints its own figures (no report exchange).
     */
    private void send(PerftestComm comm, Remote r, Endpoint e, PerftestComm.Dest[] my, PerftestComm.Dest[] rem, long per, StringBuilder out) {
        int size = p.sizes.get(0);
        int iters = p.itersFor(size);
        ServerRecvs recvs = r.server() ? new ServerRecvs(e, per, size, iters) : null;
        comm.handShake(my[0]);
        PerftestComm.BwReport b = r.server() ? recvs.run() : runIterBw(e, rem, per, size, iters);
        out.append(new PerftestResult.Bw(size, iters, b.bwPeak(), b.bwAvg(), b.msgRate()).row()).append('\n');
        comm.close(my[0]);
    }

    private void banner(StringBuilder out, IbvDevice dev, Remote r, IbvPortAttr port, int mtu, int gidx, PeerMemoryAllocator mem) {
        out.append(PerftestReport.LINE).append('\n');
        out.append(String.format("                    %s%n", p.title));
        out.append(String.format(" Dual-port       : OFF\t\tDevice         : %s%n", dev.name()));
        out.append(String.format(" Number of qps   : %d\t\tTransport type : IB%n", p.qps));
        out.append(" Connection type : RC\t\tUsing SRQ      : OFF\n");
        out.append(String.format(" TX depth        : %d%n CQ Moderation   : %d%n", p.depth, Math.min(100, p.depth)));
        out.append(String.format(" Mtu             : %d[B]%n", 128 << mtu));
        out.append(" Link type       : ").append(port.linkLayer() == IbvPortAttr.LINK_LAYER_ETHERNET ? "Ethernet" : "IB").append('\n');
        if (gidx >= 0) {
            out.append(String.format(" GID index       : %d%n", gidx));
        }
        out.append(" Max inline data : 0[B]\n rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n");
        out.append(String.format(" Memory          : %s%n", mem == null ? "host" : "peer client " + mem.name()));
        out.append(String.format(" %-16s: %s, out-of-band TCP port %d%n", r.server() ? "Server" : "Client", r.server() ? "waiting for the client"
                : "towards " + r.host(), r.port()));
        out.append(PerftestReport.LINE).append('\n');
    }

    /**
     * {@code run_iter_bw} for one size on every QP towards the peer's regions; the BW peak is the
     * best 1 ms window between completions, the average over the whole run.
     */
    private PerftestComm.BwReport runIterBw(Endpoint e, PerftestComm.Dest[] rem, long per, int size, int iters) {
        int qps = p.qps;
        int depth = p.depth;
        int mod = Math.min(100, depth);
        IbvSendWr[] wr = new IbvSendWr[qps];
        long[] posted = new long[qps];
        long[] completed = new long[qps];
        for (int q = 0; q < qps; q++) {
            wr[q] = new IbvSendWr().sge(e.buf + q * per, size, e.mr.lkey());
            wr[q].opcode = p.op;
            wr[q].remoteAddr = rem[q].vaddr();
            wr[q].rkey = rem[q].rkey();
        }
        IbvWc[] wc = new IbvWc[16];
        for (int i = 0; i < wc.length; i++) {
            wc[i] = new IbvWc();
        }
        long total = (long) iters * qps;
        long done = 0;
        long t0 = System.nanoTime();
        long windowStart = t0;
        long windowDone = 0;
        double peak = 0;
        long deadline = t0 + Completions.TIMEOUT_NS;
        while (done < total) {
            Completions.checkInterrupted(p.o.tool());
            for (int q = 0; q < qps; q++) {
                while (posted[q] < iters && posted[q] - completed[q] < depth) {
                    wr[q].wrId = posted[q];
                    wr[q].sendFlags = (posted[q] + 1) % mod == 0 || posted[q] + 1 == iters ? IbvSendWr.SEND_SIGNALED : 0;
                    e.qps[q].postSend(wr[q]);
                    posted[q]++;
                }
            }
            int n = e.cq.poll(wc.length, wc);
            if (n < 0) {
                throw new IllegalStateException(p.o.tool() + ": the CQ is in error");
            }
            for (int i = 0; i < n; i++) {
                if (wc[i].status != IbvWcStatus.SUCCESS) {
                    throw new IllegalStateException(String.format("%s: Completion with error at client: %s (%d), wr_id %d", p.o.tool(),
                            wc[i].status.str(), wc[i].status.ordinal(), wc[i].wrId));
                }
                int q = qpIndex(e, wc[i].qpNum);
                done += wc[i].wrId + 1 - completed[q];
                completed[q] = wc[i].wrId + 1;
            }
            long t = System.nanoTime();
            if (n > 0 && (t - windowStart >= 1_000_000 || done == total)) {
                if (t > windowStart && done > windowDone) {
                    peak = Math.max(peak, (done - windowDone) * (double) size / ((t - windowStart) / 1e9) / (1 << 20));
                }
                windowStart = t;
                windowDone = done;
            }
            if (n > 0) {
                deadline = t + Completions.TIMEOUT_NS; // the limit is on a stall, not on the whole run
            }
            if (t - deadline > 0) {
                throw new IllegalStateException(p.o.tool() + ": no progress within 60 s (" + done + " of " + total + " completed)");
            }
        }
        double secs = Math.max(1e-9, (System.nanoTime() - t0) / 1e9);
        double avg = total * (double) size / secs / (1 << 20);
        return new PerftestComm.BwReport(size, iters, Math.max(peak, avg), avg, total / secs / 1e6);
    }

    /**
     * {@code run_iter_bw_server}: {@code -t} receives posted on each QP before the run starts, one
     * more for each that completes until {@code iters} were posted; the run ends when every QP
     * received {@code iters} messages.
     */
    private final class ServerRecvs {
        private final Endpoint e;
        private final int size;
        private final int iters;
        private final IbvRecvWr[] wr;
        private final long[] posted;

        ServerRecvs(Endpoint e, long per, int size, int iters) {
            this.e = e;
            this.size = size;
            this.iters = iters;
            this.wr = new IbvRecvWr[p.qps];
            this.posted = new long[p.qps];
            for (int q = 0; q < p.qps; q++) {
                wr[q] = new IbvRecvWr().sge(e.buf + q * per, size, e.mr.lkey());
                for (; posted[q] < Math.min(p.depth, iters); posted[q]++) {
                    e.qps[q].postRecv(wr[q]);
                }
            }
        }

        PerftestComm.BwReport run() {
            IbvWc[] wc = {new IbvWc(), new IbvWc(), new IbvWc(), new IbvWc(), new IbvWc(), new IbvWc(), new IbvWc(), new IbvWc()};
            long total = (long) iters * p.qps;
            long got = 0;
            long t0 = 0;
            long deadline = System.nanoTime() + Completions.TIMEOUT_NS;
            while (got < total) {
                Completions.checkInterrupted(p.o.tool());
                int n = e.cq.poll(wc.length, wc);
                if (n < 0) {
                    throw new IllegalStateException(p.o.tool() + ": the CQ is in error");
                }
                for (int i = 0; i < n; i++) {
                    if (wc[i].status != IbvWcStatus.SUCCESS) {
                        throw new IllegalStateException(String.format("%s: Completion with error at server: %s (%d)", p.o.tool(), wc[i].status.str(),
                                wc[i].status.ordinal()));
                    }
                    if (got++ == 0) {
                        t0 = System.nanoTime(); // the server's clock starts with the first message: it cannot see the client's start
                    }
                    int q = qpIndex(e, wc[i].qpNum);
                    if (posted[q] < iters) {
                        e.qps[q].postRecv(wr[q]);
                        posted[q]++;
                    }
                }
                if (n == 0 && System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException(p.o.tool() + ": no message within 60 s (" + got + " of " + total + " received)");
                }
            }
            double secs = Math.max(1e-9, (System.nanoTime() - t0) / 1e9);
            double avg = total * (double) size / secs / (1 << 20);
            return new PerftestComm.BwReport(size, iters, avg, avg, total / secs / 1e6);
        }
    }

    /**
     * {@code run_iter_lat_write}: each side writes its counter in the last byte of its message into
     * the peer's region and waits for the peer's in its own; the server writes first. The latency
     * of an iteration is half the time between two of this side's writes.
     */
    private String runIterLatWrite(Endpoint e, boolean server, long per, PerftestComm.Dest rem) {
        int size = p.sizes.get(0);
        int iters = p.itersFor(size);
        IbvSendWr w = new IbvSendWr().sge(e.buf, size, e.mr.lkey());
        w.opcode = IbvWrOpcode.RDMA_WRITE;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.remoteAddr = rem.vaddr();
        w.rkey = rem.rkey();
        long postVa = e.buf + size - 1;
        long pollVa = e.buf + p.qps * per + size - 1; // where the peer's write of its last byte lands (the vaddr this side sent)
        long[] posted = new long[iters];
        IbvWc[] wc = {new IbvWc()};
        int scnt = 0;
        int rcnt = 0;
        while (scnt < iters || rcnt < iters) { // the server ends waiting for the client's last write
            if (rcnt < iters && !(scnt < 1 && server)) {
                rcnt++;
                spin(e, pollVa, (byte) rcnt);
            }
            if (scnt < iters) {
                posted[scnt] = System.nanoTime();
                e.writeByte(postVa, (byte) ++scnt);
                e.qps[0].postSend(w);
                Completions.waitOk(e.cq, wc, p.o.tool() + " write");
            }
        }
        double[] lat = new double[Math.max(1, iters - 1)];
        for (int i = 0; i + 1 < iters; i++) {
            lat[i] = (posted[i + 1] - posted[i]) / 2e3;
        }
        java.util.Arrays.sort(lat);
        return PerftestResult.Lat.of(size, lat).row();
    }

    private void spin(Endpoint e, long va, byte want) {
        long deadline = System.nanoTime() + Completions.TIMEOUT_NS;
        for (int spins = 0; e.readByte(va) != want; spins++) {
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException(p.o.tool() + ": the peer's write did not arrive within 60 s");
            }
            Completions.relax(spins);
        }
    }

    private static int qpIndex(Endpoint e, int qpn) {
        for (int i = 0; i < e.qps.length; i++) {
            if (e.qps[i].qpNum() == qpn) {
                return i;
            }
        }
        throw new IllegalStateException("completion for unknown QP 0x" + Integer.toHexString(qpn));
    }
}
