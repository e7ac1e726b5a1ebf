package org.peerdirect.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvMr;

/**
 * Registration and deregistration of 1 GiB on mlx5: in GPU memory (16 384 pages of 64 KiB through
 * the persistent nv_mem, BAR1 slots mapped into the HCA's IOMMU domain; the RM's modelled pin cost
 * is printed, not slept) or in pinned host memory (262 144 pages of 4 KiB pinned and mapped), on
 * the same rig in the same run: the ratio is {@code mem=gpu} over {@code mem=host}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xmx2g"})
public class GpuRegBench {

    @Param({"gpu", "host"})
    public String mem;

    private RdmaRig rig;
    private long buf;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        rig = new RdmaRig("mlx5-gpu", 1536L << 20, 1L << 20, 1, 16);
        if (mem.equals("gpu")) {
            buf = rig.rm.cuMemAlloc(rig.proc, 1L << 30);
        } else {
            buf = rig.proc.mmap(1L << 30);
            rig.proc.populate(buf, 1L << 30, true);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        if (mem.equals("gpu")) {
            System.out.printf("%n[modelled BAR1 pin time so far: %.1f ms]%n", rig.rm.modelledPinNanos() / 1e6);
            rig.rm.cuMemFree(rig.proc, buf);
        } else {
            rig.proc.munmap(buf, 1L << 30);
        }
        rig.close();
    }

    @Benchmark
    @Warmup(iterations = 2)
    @Measurement(iterations = 5)
    @OutputTimeUnit(TimeUnit.MILLISECONDS)
    public int reg1GiB() {
        IbvMr mr = rig.b.pd.regMr(buf, 1L << 30, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE);
        int k = mr.lkey();
        mr.dereg();
        return k;
    }
}
