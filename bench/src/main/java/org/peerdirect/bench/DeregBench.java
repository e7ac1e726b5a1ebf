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
import org.peerdirect.kernel.mm.Vma;

/**
 * The ODP seed's deregistration figure: {@code mrs} MRs of 2 MiB deregistered one after the other,
 * pinned ({@code mode=pinned}: revoke by UMR, unpin, unmap, back to the mkey cache) against ODP
 * ({@code mode=odp}: the use count drained, the present entries zapped by UMR, unmapped, nothing to
 * unpin). All MRs cover the same resident 2 MiB buffer, so the ODP ones are fully mapped by their
 * registration's snapshot and both kinds tear down 512 mapped pages each. The seed reports 95 ms
 * (ODP) against 172 ms (pinned) for 10 000 MRs "of 2M huge page each": a ratio of 0.55. So
 * {@code page=2m} backs the buffer with a hugetlb page and registers the ODP MRs with
 * {@code IB_ACCESS_HUGETLB} (one 2 MiB granule each; the pinned MRs still pin and map 512 frames,
 * as {@code pin_user_pages} does), the seed's case; {@code page=4k} is ordinary memory, 512
 * granules per ODP MR. Single shot per invocation: the registrations are made in the
 * invocation's setup, outside the measurement.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 2, batchSize = 1)
@Measurement(iterations = 5, batchSize = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class DeregBench {

    static final long MR = 2L << 20;

    @Param({"pinned", "odp"})
    public String mode;

    @Param({"10000"})
    public int mrs;

    @Param({"4k", "2m"})
    public String page;

    private RdmaRig rig;
    private long buf;
    private IbvMr[] regs;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        rig = new RdmaRig("mlx5", 64L << 20, 1L << 20, 1, 16);
        rig.proc.setMemlockLimit(Long.MAX_VALUE); // every pinned registration of the buffer is charged again
        buf = page.equals("2m") ? rig.proc.mmap(0, MR, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "[hugetlb]") : rig.proc.mmap(MR);
        rig.proc.populate(buf, MR, true);
        regs = new IbvMr[mrs];
    }

    @Setup(Level.Invocation)
    public void register() {
        int access = RdmaRig.RW | (mode.equals("odp") ? IbAccess.ON_DEMAND | (page.equals("2m") ? IbAccess.HUGETLB : 0) : 0);
        for (int i = 0; i < mrs; i++) {
            regs[i] = rig.a.pd.regMr(buf, MR, access);
        }
    }

    @Benchmark
    public int deregAll() {
        for (IbvMr mr : regs) {
            mr.dereg();
        }
        return regs.length;
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        rig.close();
    }
}
