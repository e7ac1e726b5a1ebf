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
 * GPUDirect RDMA on mlx5: {@code freeToRevoke} is the latency of a {@code cudaFree} of a registered 64 KiB buffer until it
 * returns, i.e. free callback → IB invalidate → UMR revoke of the mkey → BAR1 unmapped, with
 * {@code live} registrations of other GPU buffers alive (1, 100, 10 000). The invalidating nv_mem.
 * The reference in the same run is the parameter itself: {@code live=1} (nothing else registered).
 * The write ratio is {@code RdmaWriteBench} with {@code driver=mlx5-gpu}; registration of 1 GiB is
 * {@link GpuRegBench}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xmx2g"})
public class GpuFreeBench {

    /** Registrations of other GPU buffers alive while the measured buffer is freed. */
    @Param({"1", "100", "10000"})
    public int live;

    private RdmaRig rig;
    private final List<IbvMr> others = new ArrayList<>();
    private final List<Long> otherBufs = new ArrayList<>();
    private long target;
    private IbvMr targetMr;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        rig = new RdmaRig("mlx5-gpu-inval", 256L << 20, 1L << 20, 1, 16);
        for (int i = 0; i < live - 1; i++) {
            long b = rig.rm.cuMemAlloc(rig.proc, 64 << 10);
            otherBufs.add(b);
            others.add(rig.b.pd.regMr(b, 64 << 10, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE));
        }
    }

    @Setup(Level.Invocation)
    public void registerTarget() {
        target = rig.rm.cuMemAlloc(rig.proc, 64 << 10);
        targetMr = rig.b.pd.regMr(target, 64 << 10, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE);
    }

    @Benchmark
    @Warmup(iterations = 20)
    @Measurement(iterations = 200)
    public boolean freeToRevoke() {
        rig.rm.cuMemFree(rig.proc, target); // returns once the mkey is revoked and BAR1 unmapped
        return targetMr.invalidated();
    }

    @TearDown(Level.Invocation)
    public void deregTarget() {
        if (!targetMr.invalidated()) {
            throw new IllegalStateException("the free did not invalidate the MR");
        }
        targetMr.dereg(); // only cleans up
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        for (IbvMr m : others) {
            m.dereg();
        }
        for (long b : otherBufs) {
            rig.rm.cuMemFree(rig.proc, b);
        }
        rig.close();
    }
}
