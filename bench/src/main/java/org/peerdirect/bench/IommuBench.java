package org.peerdirect.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.PinnedPages;

/**
 * The IOMMU's data path alone, beside its reference in the same run: {@code copyTo} moves
 * {@code size} bytes from one device's domain to another's (the requester's read and the
 * responder's write of an RDMA WRITE), {@code write} from a device buffer into a domain;
 * {@code refCopy} is {@code MemorySegment.copy} of the same size between two off-heap segments
 * (what {@link MemoryCopyBench} measures). {@code pages=contiguous}: each buffer's frames follow
 * on (one run per side); {@code pages=shuffled}: every 4 KiB page of the source maps a frame
 * apart from its neighbours (a run per page).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class IommuBench {

    /** Bytes per transfer. */
    @Param({"4096", "65536"})
    public int size;

    /** contiguous or shuffled frames behind the source buffer. */
    @Param({"contiguous", "shuffled"})
    public String pages;

    private Path swap;
    private Mm mm;
    private AddressSpace proc;
    private Iommu iommu;
    private IommuDomain d0;
    private IommuDomain d1;
    private PinnedPages p0;
    private PinnedPages p1;
    private long iova0;
    private long iova1;
    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;

    @Setup
    public void setup() throws Exception {
        swap = Files.createTempFile("pd-bench-swap", "");
        mm = new Mm(64L << 20, false, swap, 16L << 20);
        iommu = new Iommu(mm);
        proc = mm.createProcess("bench");
        proc.setMemlockLimit(1L << 30);
        long len = Math.max(size, 4096);
        long a = proc.mmap(2 * len);
        long b = proc.mmap(len);
        proc.populate(a, 2 * len, true);
        proc.populate(b, len, true);
        p0 = proc.pinUserPages(a, 2 * len, false);
        p1 = proc.pinUserPages(b, len, true);
        long[] pfns = p0.pfns();
        int n = (int) (len >>> 12);
        long[] use = new long[n];
        for (int i = 0; i < n; i++) { // shuffled: every other frame of twice the buffer, from the end down
            use[i] = pages.equals("shuffled") ? pfns[2 * n - 1 - 2 * i] : pfns[i];
        }
        d0 = iommu.createDomain("dev0");
        d1 = iommu.createDomain("dev1");
        iova0 = d0.dmaMapSg(use, DmaDirection.BIDIRECTIONAL);
        iova1 = d1.dmaMapSg(p1.pfns(), DmaDirection.BIDIRECTIONAL);
        arena = Arena.ofShared();
        src = arena.allocate(len, 4096);
        dst = arena.allocate(len, 4096);
    }

    @TearDown
    public void tearDown() throws Exception {
        d0.dmaUnmap(iova0, (int) (Math.max(size, 4096) >>> 12));
        d1.dmaUnmap(iova1, (int) (Math.max(size, 4096) >>> 12));
        iommu.destroyDomain(d0);
        iommu.destroyDomain(d1);
        p0.unpin(false);
        p1.unpin(true);
        proc.exit();
        mm.close();
        arena.close();
        Files.deleteIfExists(swap);
    }

    @Benchmark
    public long copyTo() {
        d0.copyTo(iova0, d1, iova1, size);
        return iova1;
    }

    @Benchmark
    public long write() {
        d1.write(iova1, src, 0, size);
        return iova1;
    }

    @Benchmark
    public long read() {
        d0.read(iova0, dst, 0, size);
        return iova0;
    }

    @Benchmark
    public MemorySegment refCopy() {
        MemorySegment.copy(src, 0, dst, 0, size);
        return dst;
    }
}
