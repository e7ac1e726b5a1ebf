package org.peerdirect.bench;

import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Vma;

/**
 * On-demand paging on mlx5, against its references in the same run:
 * <ul>
 * <li>the resident-ODP throughput is {@link RdmaWriteBench} with {@code driver=mlx5-odp} against
 * {@code driver=mlx5} (ODP MRs whose pages are all resident and mapped, against pinned MRs);</li>
 * <li>{@code faultWrite4k} (ODP MRs on both sides): the responder's 4 KiB page dropped ({@code MADV_DONTNEED},
 * which zaps it by UMR), then one signaled 4 KiB RDMA WRITE into it: the device misses, raises the
 * page-fault EQE, mlx5_ib's work maps it and resumes, the requester's RNR retry (min_rnr_timer 1:
 * 10 µs) lands the write; {@code write4k} the same write with the page present; {@code cpuFault4k}
 * the same drop followed by a CPU write of one byte (a zero-fill page fault). Fault service ≈
 * faultWrite4k − write4k − (cpuFault4k's drop), against cpuFault4k.</li>
 * <li>{@code faultLocal4k}: the requester's own 4 KiB source page dropped instead, then a 4 KiB
 * WRITE from it into resident memory: a requester WQE page fault (the EQE names the WQE, mlx5_ib
 * reads it from the user's queue and maps its SGEs, then resumes), with no RNR NAK and no RNR
 * timer in the way; the fault path alone.</li>
 * <li>the same for a 2 MiB huge page ({@code faultWrite2m}, {@code write2m}, {@code cpuFault2m}):
 * the responder's ODP MR is registered with {@code IB_ACCESS_HUGETLB} over hugetlb memory, so its
 * umem works in 2 MiB granules; the drop takes the whole huge page and the 4 KiB write's fault
 * maps all of it back (one granule, 512 IOMMU pages); the CPU reference zero-fills a 2 MiB
 * hugetlb page.</li>
 * <li>the fault rate under {@code MADV_DONTNEED} churn ({@code Mode.Throughput}): {@code churn64k}
 * drops the responder's 64 KiB target and writes 64 KiB into it, again and again: every write
 * page-faults (one RDMA fault, the driver maps and prefetches the operation's range);
 * {@code churnPrefetch64k} prefetches the dropped range first ({@code ibv_advise_mr}
 * PREFETCH_WRITE with FLUSH), so the write finds it mapped. The secondary score
 * {@code deviceFaults} is the responder's page faults per second (mlx5_ib's counter), the primary
 * the churn iterations per second.</li>
 * </ul>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class OdpBench {

    static final int SIZE = 65536;

    private RdmaRig rig;
    private IbvQp qp;
    private IbvCq cq;
    private final IbvSendWr small = new IbvSendWr();
    private final IbvWc[] wc = {new IbvWc()};
    /** The responder's page {@link #faultWrite4k} drops and writes (past the 64 KiB {@link #write} uses). */
    private long victim;
    private long cpuPage;
    /** {@link #faultLocal4k}'s WRITE: from the requester's page it drops into resident memory. */
    private final IbvSendWr localWrite = new IbvSendWr();
    private long localPage;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        rig = new RdmaRig("mlx5-odp", 64L << 20, 1L << 20, 1, 64);
        RdmaRig.Conn c = rig.conns[0];
        qp = c.aqp;
        cq = c.acq;
        rig.firstWrite(new IbvSendWr(), SIZE, qp, cq, wc);
        current = rig;
        victim = rig.b.buf + (512L << 10);
        cpuPage = rig.proc.mmap(4096);
        small.sge(rig.a.buf, 4096, rig.a.mr.lkey());
        small.opcode = IbvWrOpcode.RDMA_WRITE;
        small.remoteAddr = victim;
        small.rkey = rig.b.mr.rkey();
        small.sendFlags = IbvSendWr.SEND_SIGNALED;
        localPage = rig.a.buf + (512L << 10);
        localWrite.sge(localPage, 4096, rig.a.mr.lkey());
        localWrite.opcode = IbvWrOpcode.RDMA_WRITE;
        localWrite.remoteAddr = rig.b.buf + (768L << 10);
        localWrite.rkey = rig.b.mr.rkey();
        localWrite.sendFlags = IbvSendWr.SEND_SIGNALED;
        churnTarget = rig.b.buf + (256L << 10);
        big.sge(rig.a.buf, SIZE, rig.a.mr.lkey());
        big.opcode = IbvWrOpcode.RDMA_WRITE;
        big.remoteAddr = churnTarget;
        big.rkey = rig.b.mr.rkey();
        big.sendFlags = IbvSendWr.SEND_SIGNALED;
        prefetch = new IbvSge(churnTarget, SIZE, rig.b.mr.lkey());
        hugePage = rig.proc.mmap(0, HUGE, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "[hugetlb]");
        cpuHugePage = rig.proc.mmap(0, HUGE, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "[hugetlb]");
        hugeMr = rig.b.pd.regMr(hugePage, HUGE, RdmaRig.RW | IbAccess.ON_DEMAND | IbAccess.HUGETLB);
        hugeWrite.sge(rig.a.buf, 4096, rig.a.mr.lkey());
        hugeWrite.opcode = IbvWrOpcode.RDMA_WRITE;
        hugeWrite.remoteAddr = hugePage + (1L << 20);
        hugeWrite.rkey = hugeMr.rkey();
        hugeWrite.sendFlags = IbvSendWr.SEND_SIGNALED;
    }

    static final long HUGE = 2L << 20;
    /** The responder's hugetlb page under an ODP MR with {@code IB_ACCESS_HUGETLB} (2 MiB granules), and a CPU-only one. */
    private long hugePage;
    private long cpuHugePage;
    private IbvMr hugeMr;
    private final IbvSendWr hugeWrite = new IbvSendWr();

    /** The responder's 64 KiB that the churn drops and writes. */
    private long churnTarget;
    private final IbvSendWr big = new IbvSendWr();
    private IbvSge prefetch;

    @Benchmark
    @BenchmarkMode(Mode.Throughput)
    @OutputTimeUnit(TimeUnit.SECONDS)
    public long churn64k(Faults f) {
        rig.proc.madvise(churnTarget, SIZE, AddressSpace.Advice.MADV_DONTNEED);
        qp.postSend(big);
        return RdmaRig.pollOne(cq, wc).wrId;
    }

    @Benchmark
    @BenchmarkMode(Mode.Throughput)
    @OutputTimeUnit(TimeUnit.SECONDS)
    public long churnPrefetch64k(Faults f) {
        rig.proc.madvise(churnTarget, SIZE, AddressSpace.Advice.MADV_DONTNEED);
        rig.b.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, IbvPd.ADVISE_MR_FLAG_FLUSH, prefetch);
        qp.postSend(big);
        return RdmaRig.pollOne(cq, wc).wrId;
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        current = null;
        hugeMr.dereg();
        rig.close();
    }

    /** The rig of the running trial, for {@link Faults} (one benchmark thread). */
    private static volatile RdmaRig current;

    /** The responder's page faults served by mlx5_ib (the first line of its ODP statistics). */
    static long responderFaults() {
        RdmaRig r = current;
        if (r == null) {
            return 0;
        }
        String line = r.mlx5ib[1].odpStats().getFirst();
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("faults (\\d+)").matcher(line);
        if (!m.find()) {
            throw new IllegalStateException("no fault count in: " + line);
        }
        return Long.parseLong(m.group(1));
    }

    /** The responder's device page faults during each measured iteration (reported per second). */
    @AuxCounters(AuxCounters.Type.OPERATIONS)
    @State(Scope.Thread)
    public static class Faults {
        public long deviceFaults;
        private long before;

        @Setup(Level.Iteration)
        public void start() {
            deviceFaults = 0;
            before = responderFaults();
        }

        @TearDown(Level.Iteration)
        public void stop() {
            deviceFaults = responderFaults() - before;
        }
    }

    @Benchmark
    public long write4k() {
        qp.postSend(small);
        return RdmaRig.pollOne(cq, wc).wrId;
    }

    @Benchmark
    public long faultWrite4k() {
        rig.proc.madvise(victim, 4096, AddressSpace.Advice.MADV_DONTNEED);
        qp.postSend(small);
        return RdmaRig.pollOne(cq, wc).wrId;
    }

    @Benchmark
    public long faultLocal4k() {
        rig.proc.madvise(localPage, 4096, AddressSpace.Advice.MADV_DONTNEED);
        qp.postSend(localWrite);
        return RdmaRig.pollOne(cq, wc).wrId;
    }

    @Benchmark
    public long write2m() {
        qp.postSend(hugeWrite);
        return RdmaRig.pollOne(cq, wc).wrId;
    }

    @Benchmark
    public long faultWrite2m() {
        rig.proc.madvise(hugePage, HUGE, AddressSpace.Advice.MADV_DONTNEED);
        qp.postSend(hugeWrite);
        return RdmaRig.pollOne(cq, wc).wrId;
    }

    /** A hugetlb page under no MR: dropped, then one byte written: a 2 MiB zero-fill fault. */
    @Benchmark
    public long cpuFault2m() {
        rig.proc.madvise(cpuHugePage, HUGE, AddressSpace.Advice.MADV_DONTNEED);
        rig.proc.writeByte(cpuHugePage + (1L << 20), (byte) 1);
        return cpuHugePage;
    }

    /** A page under no MR: its drop notifies nobody, its write is a plain zero-fill fault. */
    @Benchmark
    public long cpuFault4k() {
        rig.proc.madvise(cpuPage, 4096, AddressSpace.Advice.MADV_DONTNEED);
        rig.proc.writeByte(cpuPage, (byte) 1);
        return cpuPage;
    }
}
