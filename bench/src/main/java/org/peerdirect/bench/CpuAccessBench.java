package org.peerdirect.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * sim-kernel CPU access against its references, in one run: {@code AddressSpace.readLong} /
 * {@code copyOut(4 KiB)} of resident pages against plain {@code MemorySegment} access of the same
 * size, and an anonymous fault-in of a 4 KiB page (mmap's first touch, then MADV_DONTNEED)
 * against {@code MemorySegment.fill} of 4 KiB.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class CpuAccessBench {

    private Mm mm;
    private AddressSpace as;
    private long va;
    private long faultVa;
    private Arena arena;
    private MemorySegment plain;
    private MemorySegment buf;
    private int i;

    @Setup
    public void setup() throws Exception {
        mm = new Mm(256L << 20, false, Files.createTempFile("pd-bench-swap", ""), 16L << 20);
        as = mm.createProcess("bench");
        va = as.mmap(1 << 20);
        as.populate(va, 1 << 20, true);
        faultVa = as.mmap(4096);
        arena = Arena.ofConfined();
        plain = arena.allocate(1 << 20, 4096);
        buf = arena.allocate(4096, 4096);
    }

    @TearDown
    public void tearDown() {
        mm.close();
        arena.close();
    }

    @Benchmark
    public long simReadLong() {
        i = (i + 8) & ((1 << 20) - 8);
        return as.readLong(va + i);
    }

    @Benchmark
    public long refReadLong() {
        i = (i + 8) & ((1 << 20) - 8);
        return plain.get(ValueLayout.JAVA_LONG_UNALIGNED, i);
    }

    @Benchmark
    public MemorySegment simCopyOut4k() {
        i = (i + 4096) & ((1 << 20) - 4096);
        as.copyOut(va + i, buf, 0, 4096);
        return buf;
    }

    @Benchmark
    public MemorySegment refCopy4k() {
        i = (i + 4096) & ((1 << 20) - 4096);
        MemorySegment.copy(plain, i, buf, 0, 4096);
        return buf;
    }

    /** First touch of an anonymous page (zero-fill fault), then MADV_DONTNEED to make it absent again. */
    @Benchmark
    public void simFaultIn4k() {
        as.writeByte(faultVa, (byte) 1);
        as.madvise(faultVa, 4096, AddressSpace.Advice.MADV_DONTNEED);
    }

    @Benchmark
    public MemorySegment refFill4k() {
        return buf.fill((byte) 0);
    }
}
