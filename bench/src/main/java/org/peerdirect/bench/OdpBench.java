package org.peerdirect.bench;

import java.util.concurrent.TimeUnit;

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
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;

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

    @Setup(Level.Trial)
    public void setup() throws Exception {
        rig = new RdmaRig("mlx5-odp", 64L << 20, 1L << 20, 1, 64);
        RdmaRig.Conn c = rig.conns[0];
        qp = c.aqp;
        cq = c.acq;
        rig.firstWrite(new IbvSendWr(), SIZE, qp, cq, wc);
        victim = rig.b.buf + (512L << 10);
        cpuPage = rig.proc.mmap(4096);
        small.sge(rig.a.buf, 4096, rig.a.mr.lkey());
        small.opcode = IbvWrOpcode.RDMA_WRITE;
        small.remoteAddr = victim;
        small.rkey = rig.b.mr.rkey();
        small.sendFlags = IbvSendWr.SEND_SIGNALED;
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        rig.close();
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

    /** A page under no MR: its drop notifies nobody, its write is a plain zero-fill fault. */
    @Benchmark
    public long cpuFault4k() {
        rig.proc.madvise(cpuPage, 4096, AddressSpace.Advice.MADV_DONTNEED);
        rig.proc.writeByte(cpuPage, (byte) 1);
        return cpuPage;
    }
}
