package org.peerdirect.bench;

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
 * Registration and deregistration of {@code size} bytes of pinned host memory, through ib-core:
 * on mlx4 an MPT by {@code SW2HW_MPT} and {@code HW2SW_MPT} commands; on mlx5 a free mkey from the
 * mkey cache enabled by a UMR work request and, at dereg, revoked by one and given back (after the
 * first miss every iteration is a cache hit: no firmware command). Both pin, map and unmap the
 * same pages; the difference is the key's path. Compare the two in one run.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class MrRegBench {

    /** Bytes registered: 64 KiB (16 pages) and 1 MiB (256 pages, one UMR chunk of 512 entries). */
    @Param({"65536", "1048576"})
    public int size;

    @Param({"mlx4", "mlx5"})
    public String driver;

    private RdmaRig rig;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        rig = new RdmaRig(driver, 64L << 20, 1L << 20, 1, 16);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        rig.close();
    }

    @Benchmark
    public int regDereg() {
        IbvMr mr = rig.b.pd.regMr(rig.b.buf, size, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE);
        int k = mr.lkey();
        mr.dereg();
        return k;
    }
}
