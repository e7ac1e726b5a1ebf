package org.peerdirect.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
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

/**
 * The reference every data-path figure is measured against: {@code MemorySegment.copy} between
 * two off-heap segments of the sizes RDMA benchmarks use. Later benchmarks report their
 * throughput as a ratio to this, measured in the same run.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class MemoryCopyBench {

    /** Bytes per copy: 64 B, 4 KiB, 64 KiB, 1 MiB. */
    @Param({"64", "4096", "65536", "1048576"})
    public int size;

    private Arena arena;
    private MemorySegment src;
    private MemorySegment dst;

    @Setup(Level.Trial)
    public void setup() {
        arena = Arena.ofConfined();
        src = arena.allocate(size, 4096);
        dst = arena.allocate(size, 4096);
        for (long i = 0; i < size; i += 8) {
            src.set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    public MemorySegment copy() {
        MemorySegment.copy(src, 0, dst, 0, size);
        return dst;
    }

    /**
     * The same copy between two device-model memories (each {@code Mm.deviceMemory} in its own
     * shared arena, as a GPU's video memory and the simulated physical memory are): what a DMA
     * between host frames and a GPU page costs beyond the reference above.
     */
    @State(Scope.Thread)
    public static class Device {
        Arena a;
        Arena b;
        MemorySegment src;
        MemorySegment dst;

        @Setup(Level.Trial)
        public void setup(MemoryCopyBench outer) {
            a = Arena.ofShared();
            b = Arena.ofShared();
            src = org.peerdirect.kernel.mm.Mm.deviceMemory(Math.max(outer.size, 4096), a);
            dst = org.peerdirect.kernel.mm.Mm.deviceMemory(Math.max(outer.size, 4096), b);
            src.fill((byte) 1);
            dst.fill((byte) 2);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            a.close();
            b.close();
        }
    }

    @Benchmark
    public MemorySegment copyDevice(Device d) {
        MemorySegment.copy(d.src, 0, d.dst, 0, size);
        return d.dst;
    }
}
