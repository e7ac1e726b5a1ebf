package org.peerdirect.rdma.tools;

import java.util.Arrays;
import java.util.List;

import org.peerdirect.ib.core.umem.IbAccess;

import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * perftest's {@code ib_write_bw}, {@code ib_read_bw}, {@code ib_send_bw} and
 * {@code ib_write_lat}, and {@code ib_atomic_bw} ({@code -A}: FETCH_AND_ADD, CMP_AND_SWAP, and the
 * IBA 1.5 ATOMIC_WRITE perftest does not have), with perftest's banner and columns. Bandwidth tests keep {@code -t} (128)
 * requests outstanding per QP and signal every 100th (CQ moderation); BW peak is the best 1 ms
 * window. {@code -a} sweeps 2 B … 8 MiB; to keep a sweep short, each size moves at most 512 MiB
 * (perftest would move {@code -n × size}), which the banner states.
 */
final class Perftest {

    static final int MAX_SWEEP = 8 << 20;
    static final long SWEEP_CAP = 512L << 20;
    static final String LINE = "---------------------------------------------------------------------------------------";

    private final RdmaTools tools;
    private final String title;
    private final IbvWrOpcode op;
    private final boolean latency;
    /** ib_atomic_bw: 8-byte operations on one remote word, the operation from {@code -A}. */
    private final boolean atomic;
    private final Options o;

    /** {@code op} null: ib_atomic_bw, the operation named by {@code -A}. */
    Perftest(RdmaTools tools, String title, IbvWrOpcode op, boolean latency, Object[] args) {
        this.tools = tools;
        this.title = title;
        this.latency = latency;
        this.atomic = op == null;
        this.o = atomic ? atomicOptions(args) : new Options("rdma:" + (latency ? "write_lat" : op == IbvWrOpcode.SEND ? "send_bw"
                : op == IbvWrOpcode.RDMA_READ ? "read_bw" : "write_bw"),
                title + " between two simulated processes, as perftest's ib_" + (latency ? "write_lat" : op == IbvWrOpcode.SEND ? "send_bw"
                        : op == IbvWrOpcode.RDMA_READ ? "read_bw" : "write_bw") + ". Example: rdma:write_bw -s 64K -n 10000",
                args, List.of(
                        Options.value("-s", "SIZE", "message size in bytes (K/M suffixes)", latency ? 2 : 65536),
                        Options.value("-n", "ITERS", "iterations per QP", latency ? 1000 : 5000),
                        Options.value("-q", "QPS", "number of QPs" + (latency ? " (1 for latency)" : ", up to 16"), 1),
                        Options.value("-t", "DEPTH", "TX depth: work requests in flight per QP", 128),
                        Options.value("-d", "DEVICE", "client device, the server takes the next (rdma:devices)", null),
                        RdmaTools.memOption(),
                        Options.flag("--dmabuf", "with --mem: dma-buf MRs (ibv_reg_dmabuf_mr), as perftest --use_cuda_dmabuf"),
                        Options.flag("--odp", "register host memory on demand (ODP), as perftest --odp: the devices fault the pages in"),
                        Options.flag("--use_hugepages", "host buffers in 2 MiB huge pages (MAP_HUGETLB), as perftest --use_hugepages; "
                                + "each is one 2 MiB IOMMU entry; with --odp the MRs take IB_ACCESS_HUGETLB (2 MiB ODP granules)"),
                        Options.flag("-a", "run all sizes from 2 bytes to 8 MiB")));
        this.op = atomic ? atomicOp(o) : op;
    }

    private static Options atomicOptions(Object[] args) {
        return new Options("rdma:atomic_bw", "8-byte atomic operations on one remote word between two simulated processes, as perftest's "
                + "ib_atomic_bw; -A ATOMIC_WRITE is IBA 1.5's (not in perftest). Example: rdma:atomic_bw -d mlx5_1 -A ATOMIC_WRITE --odp",
                args, List.of(
                        Options.value("-A", "TYPE", "FETCH_AND_ADD, CMP_AND_SWAP or ATOMIC_WRITE", "FETCH_AND_ADD"),
                        Options.value("-n", "ITERS", "iterations per QP", 5000),
                        Options.value("-q", "QPS", "number of QPs, up to 16", 1),
                        Options.value("-t", "DEPTH", "TX depth: work requests in flight per QP", 128),
                        Options.value("-d", "DEVICE", "client device, the server takes the next (rdma:devices)", null),
                        RdmaTools.memOption(),
                        Options.flag("--dmabuf", "with --mem: dma-buf MRs (ibv_reg_dmabuf_mr)"),
                        Options.flag("--odp", "register host memory on demand (ODP): the devices fault the pages in")));
    }

    private static IbvWrOpcode atomicOp(Options o) {
        if (o.help()) {
            return IbvWrOpcode.ATOMIC_FETCH_AND_ADD;
        }
        return switch (o.string("-A")) {
            case "FETCH_AND_ADD" -> IbvWrOpcode.ATOMIC_FETCH_AND_ADD;
            case "CMP_AND_SWAP" -> IbvWrOpcode.ATOMIC_CMP_AND_SWP;
            case "ATOMIC_WRITE" -> IbvWrOpcode.ATOMIC_WRITE;
            default -> throw new org.peerdirect.kernel.shell.UsageException("rdma:atomic_bw: -A " + o.string("-A")
                    + " is not an atomic operation (FETCH_AND_ADD, CMP_AND_SWAP, ATOMIC_WRITE)");
        };
    }

    String run() {
        if (o.help()) {
            return o.printUsage();
        }
        boolean all = !atomic && o.flag("-a");
        int size = atomic ? 8 : (int) o.number("-s", 1, MAX_SWEEP);
        int iters = (int) o.number("-n", 5, 100_000_000);
        int qps = (int) o.number("-q", 1, latency ? 1 : 16);
        int depth = (int) o.number("-t", 1, 8192);
        List<Integer> sizes = all ? RdmaTools.sweep(MAX_SWEEP) : List.of(size);
        int max = sizes.stream().mapToInt(Integer::intValue).max().orElseThrow();
        boolean huge = !atomic && o.flag("--use_hugepages");
        if (huge && !o.string("--mem").equals("host")) {
            throw new org.peerdirect.kernel.shell.UsageException(o.tool() + ": --use_hugepages backs host memory; --mem " + o.string("--mem")
                    + " is device memory");
        }
        IbvDevice[] devs = tools.devicesFor(o);
        PeerMemoryAllocator mem = tools.memoryFor(o);
        long bufSize = Math.max(4096, 2L * max);
        StringBuilder out = new StringBuilder();
        boolean dmabuf = o.flag("--dmabuf");
        if (dmabuf && mem == null) {
            throw new org.peerdirect.kernel.shell.UsageException(o.tool() + ": --dmabuf registers peer memory exported as a dma-buf: give --mem <peer client>");
        }
        Endpoint.Odp odp = o.flag("--odp") ? Endpoint.Odp.EXPLICIT : Endpoint.Odp.NONE;
        int extra = huge ? IbAccess.HUGETLB : 0;
        try (Endpoint server = new Endpoint(tools.mm(), "perftest-server", devs[1], bufSize, qps, depth, mem, false, odp, -1, dmabuf, extra);
                Endpoint client = new Endpoint(tools.mm(), "perftest-client", devs[0], bufSize, qps, depth, mem, false, odp, -1, dmabuf, extra)) {
            for (int q = 0; q < qps; q++) {
                Endpoint.connect(client, server, q);
                Endpoint.connect(server, client, q);
            }
            banner(out, devs[0], client.gid != null, qps, depth, mem, all);
            out.append(latency
                    ? " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
                    : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
            for (int s : sizes) {
                int n = all ? (int) Math.max(5, Math.min(iters, SWEEP_CAP / s)) : iters;
                out.append(latency ? latencyRow(client, server, s, n) : bwRow(client, server, s, n, qps, depth)).append('\n');
            }
            if (atomic && mem == null) {
                out.append(checkAtomicWord(server, iters, qps)).append('\n');
            }
            long superpages = huge ? tools.superpages() : -1;
            if (superpages >= 0) {
                out.append(String.format(" IOMMU: %d 2 MiB entries map the buffers now (one per huge page, where 512 4 KiB entries map ordinary pages)%n",
                        superpages));
            }
            out.append(LINE);
        }
        return out.toString();
    }

    private void banner(StringBuilder out, IbvDevice dev, boolean ethernet, int qps, int depth, PeerMemoryAllocator mem, boolean all) {
        out.append(LINE).append('\n');
        out.append(String.format("                    %s%n", title));
        out.append(String.format(" Dual-port       : OFF\t\tDevice         : %s%n", dev.name()));
        out.append(String.format(" Number of qps   : %d\t\tTransport type : IB%n", qps));
        out.append(" Connection type : RC\t\tUsing SRQ      : OFF\n");
        if (!latency) {
            out.append(String.format(" TX depth        : %d%n", depth));
            out.append(String.format(" CQ Moderation   : %d%n", Math.min(100, depth)));
        }
        out.append(" Mtu             : 4096[B]\n Link type       : ").append(ethernet ? "Ethernet" : "IB")
                .append("\n Max inline data : 0[B]\n rdma_cm QPs\t : OFF\n");
        if (ethernet) { // perftest prints the GID index it addresses by on RoCE
            out.append(" GID index       : 0\n");
        }
        out.append(" Data ex. method : in-JVM fabric\n");
        out.append(String.format(" Memory          : %s%n", mem == null ? "host" + (!atomic && o.flag("--use_hugepages") ? ", 2 MiB huge pages" : "")
                + (o.flag("--odp") ? ", registered on demand (ODP)" : "")
                : "peer client " + mem.name() + (o.flag("--dmabuf") ? ", dma-buf MRs" : "")));
        if (all) {
            out.append(String.format(" Iterations      : at most %d MiB per size and QP%n", SWEEP_CAP >> 20));
        }
        out.append(LINE).append('\n');
    }

    // ------------------------------------------------------------------ bandwidth

    private String bwRow(Endpoint c, Endpoint s, int size, int iters, int qps, int depth) {
        int mod = Math.min(100, depth);
        IbvSendWr[] wr = new IbvSendWr[qps];
        IbvRecvWr[] rwr = new IbvRecvWr[qps];
        long[] posted = new long[qps];
        long[] completed = new long[qps];
        long[] recvPosted = new long[qps];
        boolean send = op == IbvWrOpcode.SEND;
        for (int q = 0; q < qps; q++) {
            wr[q] = new IbvSendWr().sge(c.buf, size, c.mr.lkey());
            wr[q].opcode = op;
            if (op == IbvWrOpcode.ATOMIC_WRITE) {
                wr[q].numSge = 0; // the 8 bytes travel in the request: its number, set at each post
            }
            wr[q].compareAdd = op == IbvWrOpcode.ATOMIC_FETCH_AND_ADD ? 1 : 0;
            wr[q].remoteAddr = s.buf;
            wr[q].rkey = s.mr.rkey();
            if (send) {
                rwr[q] = new IbvRecvWr().sge(s.buf, size, s.mr.lkey());
                for (int i = 0; i < depth && recvPosted[q] < iters; i++) {
                    s.qps[q].postRecv(rwr[q]);
                    recvPosted[q]++;
                }
            }
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
        long deadline = t0 + RdmaTools.TIMEOUT_NS;
        long received = 0;
        while (done < total || (send && received < total)) {
            RdmaTools.checkInterrupted("rdma:" + title.trim());
            for (int q = 0; q < qps; q++) {
                while (posted[q] < iters && posted[q] - completed[q] < depth && (!send || posted[q] < recvPosted[q])) {
                    long k = posted[q];
                    wr[q].wrId = k;
                    if (op == IbvWrOpcode.ATOMIC_WRITE) {
                        wr[q].compareAdd = k + 1;
                    } else if (op == IbvWrOpcode.ATOMIC_CMP_AND_SWP) {
                        wr[q].swap = k + 1; // compare 0: only the first of all QPs' swaps lands
                    }
                    wr[q].sendFlags = (k + 1) % mod == 0 || k + 1 == iters ? IbvSendWr.SEND_SIGNALED : 0;
                    c.qps[q].postSend(wr[q]);
                    posted[q]++;
                }
            }
            int n = c.cq.poll(wc.length, wc);
            if (n < 0) {
                throw new IllegalStateException("the client CQ is in error");
            }
            for (int i = 0; i < n; i++) {
                if (wc[i].status != IbvWcStatus.SUCCESS) {
                    throw new IllegalStateException(String.format("Completion with error at client: %s (%d), wr_id %d", wc[i].status.str(),
                            wc[i].status.ordinal(), wc[i].wrId));
                }
                int q = index(c, wc[i].qpNum);
                long now = wc[i].wrId + 1;
                done += now - completed[q];
                completed[q] = now;
            }
            if (send) {
                // every receive completion is polled before the size ends: left behind, they
                // filled the server's CQ across the sizes of a -a sweep (CQ overrun, then
                // "transport retry counter exceeded" at the client)
                int m = s.cq.poll(wc.length, wc);
                if (m < 0) {
                    throw new IllegalStateException("the server CQ is in error");
                }
                received += m;
                for (int i = 0; i < m; i++) {
                    if (wc[i].status != IbvWcStatus.SUCCESS) {
                        throw new IllegalStateException("Completion with error at server: " + wc[i].status.str());
                    }
                    int q = index(s, wc[i].qpNum);
                    if (recvPosted[q] < iters) {
                        s.qps[q].postRecv(rwr[q]);
                        recvPosted[q]++;
                    }
                }
            }
            long t = System.nanoTime();
            // windows start and end at completions, so the bytes counted were moved inside them
            if (n > 0 && (t - windowStart >= 1_000_000 || done == total)) {
                if (t > windowStart && done > windowDone) {
                    peak = Math.max(peak, (done - windowDone) * (double) size / ((t - windowStart) / 1e9) / (1 << 20));
                }
                windowStart = t;
                windowDone = done;
            }
            if (t - deadline > 0) {
                throw new IllegalStateException("no progress within 60 s (" + done + " of " + total + " completed)");
            }
        }
        double secs = Math.max(1e-9, (System.nanoTime() - t0) / 1e9);
        double avg = total * (double) size / secs / (1 << 20);
        return String.format(" %-10d %-14d %-18.2f %-20.2f %.6f", size, iters, Math.max(peak, avg), avg, total / secs / 1e6);
    }

    /**
     * The remote word after an atomic run: every QP's requests went to the server's first 8
     * bytes, so FETCH_AND_ADD leaves the count of all of them, ATOMIC_WRITE the last number each
     * QP stored (all QPs end on {@code iters}), CMP_AND_SWAP the first swap (1). A wrong word
     * fails the tool: the device lost or repeated an operation.
     */
    private String checkAtomicWord(Endpoint s, int iters, int qps) {
        long want = op == IbvWrOpcode.ATOMIC_FETCH_AND_ADD ? (long) iters * qps : op == IbvWrOpcode.ATOMIC_WRITE ? iters : 1;
        long got = s.proc.readLong(s.buf);
        if (got != want) {
            throw new IllegalStateException(String.format("remote word after %s: %d, expected %d", op, got, want));
        }
        return String.format(" remote word after %d x %d %s: %d (as expected)", qps, iters, op, got);
    }

    private static int index(Endpoint e, int qpn) {
        for (int i = 0; i < e.qps.length; i++) {
            if (e.qps[i].qpNum() == qpn) {
                return i;
            }
        }
        throw new IllegalStateException("completion for unknown QP 0x" + Integer.toHexString(qpn));
    }

    // ------------------------------------------------------------------ latency

    /**
     * ib_write_lat: the client writes {@code size} bytes into the server's buffer; the server sees
     * the last byte change (polling its memory), writes back; the client sees its last byte
     * change. Latency = round trip / 2.
     */
    private String latencyRow(Endpoint c, Endpoint s, int size, int iters) {
        long half = c.size / 2;
        IbvSendWr cw = new IbvSendWr().sge(c.buf, size, c.mr.lkey());
        cw.opcode = IbvWrOpcode.RDMA_WRITE;
        cw.sendFlags = IbvSendWr.SEND_SIGNALED;
        cw.remoteAddr = s.buf + half;
        cw.rkey = s.mr.rkey();
        IbvSendWr sw = new IbvSendWr().sge(s.buf, size, s.mr.lkey());
        sw.opcode = IbvWrOpcode.RDMA_WRITE;
        sw.sendFlags = IbvSendWr.SEND_SIGNALED;
        sw.remoteAddr = c.buf + half;
        sw.rkey = c.mr.rkey();
        IbvWc[] wc = {new IbvWc()};
        double[] lat = new double[iters];
        for (int i = 0; i < iters; i++) {
            byte stamp = (byte) (i % 255 + 1);
            long t0 = System.nanoTime();
            c.writeByte(c.buf + size - 1, stamp);
            c.qps[0].postSend(cw);
            RdmaTools.waitOk(c.cq, wc, "client write");
            spin(s, s.buf + half + size - 1, stamp);
            s.writeByte(s.buf + size - 1, stamp);
            s.qps[0].postSend(sw);
            RdmaTools.waitOk(s.cq, wc, "server write");
            spin(c, c.buf + half + size - 1, stamp);
            lat[i] = (System.nanoTime() - t0) / 2e3;
        }
        Arrays.sort(lat);
        double sum = 0;
        for (double v : lat) {
            sum += v;
        }
        double avg = sum / iters;
        double var = 0;
        for (double v : lat) {
            var += (v - avg) * (v - avg);
        }
        return String.format(" %-6d %-13d %-14.2f %-12.2f %-18.2f %-16.2f %-15.2f %-22.2f %-10.2f", size, iters, lat[0], lat[iters - 1],
                lat[iters / 2], avg, Math.sqrt(var / iters), lat[(int) Math.min(iters - 1, Math.ceil(iters * 0.99) - 1)],
                lat[(int) Math.min(iters - 1, Math.ceil(iters * 0.999) - 1)]);
    }

    private static void spin(Endpoint e, long va, byte stamp) {
        long deadline = System.nanoTime() + RdmaTools.TIMEOUT_NS;
        for (int spins = 0; e.readByte(va) != stamp; spins++) {
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("write_lat: the peer's write did not arrive within 60 s");
            }
            RdmaTools.relax(spins);
        }
    }
}
