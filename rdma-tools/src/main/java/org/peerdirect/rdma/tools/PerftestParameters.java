package org.peerdirect.rdma.tools;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.shell.UsageException;

/**
 * The options of perftest's tests and their values, as perftest's {@code perftest_parameters.c}
 * keeps them for every test: one table for the bandwidth and latency tests, one for
 * {@code ib_atomic_bw}. {@link #parse} reads the values in the order the errors are reported.
 */
final class PerftestParameters {

    /** {@code -a} sweeps 2 B … 8 MiB. */
    static final int MAX_SWEEP = 8 << 20;
    /** To keep a sweep short, each size moves at most 512 MiB (perftest would move {@code -n × size}), which the banner states. */
    static final long SWEEP_CAP = 512L << 20;

    /** A latency test's queue sizes (it has no -t; the queues were always this deep). */
    static final int LAT_QUEUE = 128;

    /** The banner's title ({@code RDMA_Write BW Test}). */
    final String title;
    /** The operation; for ib_atomic_bw the one {@code -A} names. */
    final IbvWrOpcode op;
    final boolean latency;
    /** ib_atomic_bw: 8-byte operations on one remote word, the operation from {@code -A}. */
    final boolean atomic;
    final Options o;

    // the values, set by parse()
    int size;
    int iters;
    int qps;
    int depth;
    /** {@code -a}: every size of {@link #sizes}. */
    boolean all;
    List<Integer> sizes;
    /** {@code --use_hugepages}: host buffers in 2 MiB pages. */
    boolean huge;
    boolean dmabuf;
    boolean odp;
    /** {@code --out_json}: the JSON report's file, or null. */
    Path jsonFile;

    private PerftestParameters(String title, IbvWrOpcode op, boolean latency, Options o) {
        this.title = title;
        this.latency = latency;
        this.atomic = op == null;
        this.o = o;
        this.op = atomic ? atomicOp(o) : op;
    }

    /** ib_write_bw, ib_read_bw, ib_send_bw ({@code name}: write_bw, read_bw, send_bw). */
    static PerftestParameters bw(String name, String title, IbvWrOpcode op, Object[] args) {
        return new PerftestParameters(title, op, false, options(name, title, false, args));
    }

    /** ib_write_lat. */
    static PerftestParameters lat(String name, String title, IbvWrOpcode op, Object[] args) {
        return new PerftestParameters(title, op, true, options(name, title, true, args));
    }

    /** ib_atomic_bw: the operation from {@code -A}, a usage error naming it when it is none. */
    static PerftestParameters atomic(String title, Object[] args) {
        return new PerftestParameters(title, null, false, atomicOptions(args));
    }

    private static Options options(String name, String title, boolean latency, Object[] args) {
        return new Options("rdma:" + name, title + " between two simulated processes, as perftest's ib_" + name
                + ". Example: rdma:write_bw -s 64K -n 10000", args, List.of(
                        Options.value("-s", "SIZE", "message size in bytes (K/M suffixes)", latency ? 2 : 65536),
                        Options.value("-n", "ITERS", "iterations per QP", latency ? 1000 : 5000),
                        Options.value("-q", "QPS", "number of QPs" + (latency ? " (1 for latency)" : ", up to 16"), 1),
                        // perftest lists -t for its bandwidth tests only: a latency test has one message in flight
                        latency ? Options.notHonoured("-t", "TX depth", "a latency test has one write in flight at a time "
                                + "(perftest's latency tests have no -t)")
                                : Options.value("-t", "DEPTH", "TX depth: work requests in flight per QP", 128),
                        Options.value("-d", "DEVICE", DeviceLookup.CLIENT_DEV, null),
                        DeviceLookup.serverOption(),
                        PeerMemory.option(),
                        Options.flag("--dmabuf", "with --mem: dma-buf MRs (ibv_reg_dmabuf_mr), as perftest --use_cuda_dmabuf"),
                        Options.flag("--odp", "register host memory on demand (ODP), as perftest --odp: the devices fault the pages in"),
                        Options.flag("--use_hugepages", "host buffers in 2 MiB huge pages (MAP_HUGETLB), as perftest --use_hugepages; "
                                + "each is one 2 MiB IOMMU entry; with --odp the MRs take IB_ACCESS_HUGETLB (2 MiB ODP granules)"),
                        Options.flag("-a", "run all sizes from 2 bytes to 8 MiB"),
                        jsonFlag(), jsonFile()), acrossHostsOptions(name, latency));
    }

    /** ib_write_bw, ib_read_bw, ib_send_bw and ib_write_lat run across hosts ({@link PerftestRemote}); ib_atomic_bw not yet. */
    static boolean acrossHosts(String name, boolean latency) {
        return name.equals("write_bw") || name.equals("read_bw") || name.equals("send_bw") || name.equals("write_lat");
    }

    private static List<Options.Opt> acrossHostsOptions(String name, boolean latency) {
        return acrossHosts(name, latency) ? Remote.options("-x") : List.of();
    }

    private static Options atomicOptions(Object[] args) {
        return new Options("rdma:atomic_bw", "8-byte atomic operations on one remote word between two simulated processes, as perftest's "
                + "ib_atomic_bw; -A ATOMIC_WRITE is IBA 1.5's (not in perftest). Example: rdma:atomic_bw -d mlx5_1 -A ATOMIC_WRITE --odp",
                args, List.of(
                        Options.value("-A", "TYPE", "FETCH_AND_ADD, CMP_AND_SWAP or ATOMIC_WRITE", "FETCH_AND_ADD"),
                        Options.value("-n", "ITERS", "iterations per QP", 5000),
                        Options.value("-q", "QPS", "number of QPs, up to 16", 1),
                        Options.value("-t", "DEPTH", "TX depth: work requests in flight per QP", 128),
                        Options.value("-d", "DEVICE", DeviceLookup.CLIENT_DEV, null),
                        DeviceLookup.serverOption(),
                        PeerMemory.option(),
                        Options.flag("--dmabuf", "with --mem: dma-buf MRs (ibv_reg_dmabuf_mr)"),
                        Options.flag("--odp", "register host memory on demand (ODP): the devices fault the pages in"),
                        // perftest's ib_atomic_bw has no -s or -a: an atomic moves 8 bytes
                        Options.notHonoured("-s", "message size", "an atomic operation moves 8 bytes (ib_atomic_bw has no -s)"),
                        Options.notHonoured("-a", "all sizes", "an atomic operation moves 8 bytes (ib_atomic_bw has no -a)"),
                        jsonFlag(), jsonFile()));
    }

    private static Options.Opt jsonFlag() {
        return Options.flag("--out_json", "also write the report as perftest's JSON (test_info, results) to --out_json_file");
    }

    private static Options.Opt jsonFile() {
        return Options.value("--out_json_file", "FILE", "the JSON report's file (implies --out_json; written after each size)",
                PerftestJson.DEFAULT_FILE);
    }

    private static IbvWrOpcode atomicOp(Options o) {
        if (o.help()) {
            return IbvWrOpcode.ATOMIC_FETCH_AND_ADD;
        }
        return switch (o.string("-A")) {
            case "FETCH_AND_ADD" -> IbvWrOpcode.ATOMIC_FETCH_AND_ADD;
            case "CMP_AND_SWAP" -> IbvWrOpcode.ATOMIC_CMP_AND_SWP;
            case "ATOMIC_WRITE" -> IbvWrOpcode.ATOMIC_WRITE;
            default -> throw new UsageException("rdma:atomic_bw: -A " + o.string("-A")
                    + " is not an atomic operation (FETCH_AND_ADD, CMP_AND_SWAP, ATOMIC_WRITE)");
        };
    }

    /** Reads the values; usage errors naming the option and the value. */
    void parse() {
        all = !atomic && o.flag("-a");
        size = atomic ? 8 : (int) o.number("-s", 1, MAX_SWEEP);
        o.conflict("-s", "-a", "-a runs every size from 2 bytes to 8 MiB; give one of them"); // after -s's own check
        iters = (int) o.number("-n", 5, 100_000_000);
        qps = (int) o.number("-q", 1, latency ? 1 : 16);
        depth = latency ? LAT_QUEUE : (int) o.number("-t", 1, 8192);
        sizes = all ? sweep(MAX_SWEEP) : List.of(size);
        huge = !atomic && o.flag("--use_hugepages");
        if (huge && !o.string("--mem").equals("host")) {
            throw new UsageException(o.tool() + ": --use_hugepages backs host memory; --mem " + o.string("--mem") + " is device memory");
        }
        dmabuf = o.flag("--dmabuf");
        odp = o.flag("--odp");
        jsonFile = PerftestJson.file(o);
    }

    /** The largest message size of the run. */
    int maxSize() {
        return sizes.stream().mapToInt(Integer::intValue).max().orElseThrow();
    }

    /** The iterations for message size {@code s}: {@code -n}, or for a sweep at most {@link #SWEEP_CAP} bytes' worth (at least 5). */
    int itersFor(int s) {
        return all ? (int) Math.max(5, Math.min(iters, SWEEP_CAP / s)) : iters;
    }

    /** 2, 4, 8 … {@code max}. */
    static List<Integer> sweep(int max) {
        List<Integer> s = new ArrayList<>();
        for (int v = 2; v <= max; v <<= 1) {
            s.add(v);
        }
        return s;
    }
}
