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
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.HmmRange;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.MmuIntervalNotifier;
import org.peerdirect.kernel.mm.PinnedPages;

/**
 * Registration-path costs of sim-kernel, each beside a reference of the same run:
 * <ul>
 * <li>{@code pinUnpin1GiB}: {@code pin_user_pages} + unpin of 1 GiB of resident anonymous memory
 * (262 144 pages); divide by 262 144 for the per-page cost (the real kernel: about 0.3 µs per
 * page, libfabric#4738). Reference: {@code refFill1GiB}, writing the same gigabyte once.</li>
 * <li>{@code hmmRangeFault2MiB}: {@code hmm_range_fault} over a resident 2 MiB range (512 pages,
 * fault flags set, nothing to fault). Reference: {@code refFill2MiB}.</li>
 * </ul>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class PinHmmBench {

    static final long GIB = 1L << 30;
    static final long TWO_MIB = 2L << 20;

    private Path swap;
    private Mm mm;
    private AddressSpace as;
    private long big;
    private long small;
    private MmuIntervalNotifier notifier;
    private HmmRange range;
    private Arena arena;
    private MemorySegment ref;

    @Setup
    public void setup() throws Exception {
        swap = Files.createTempFile("pd-bench-swap", "");
        mm = new Mm(GIB + (64L << 20), false, swap, 16L << 20);
        as = mm.createProcess("bench");
        as.setMemlockLimit(2 * GIB);
        big = as.mmap(GIB);
        as.populate(big, GIB, true);
        small = big; // the first 2 MiB of the resident gigabyte
        notifier = as.insertNotifier(small, TWO_MIB, (n, r, seq) -> {
            n.setSeq(seq);
            return true;
        });
        range = new HmmRange(notifier, small, small + TWO_MIB, HmmRange.HMM_PFN_REQ_FAULT | HmmRange.HMM_PFN_REQ_WRITE);
        arena = Arena.ofShared();
        ref = arena.allocate(GIB, 4096);
    }

    @TearDown
    public void tearDown() throws Exception {
        notifier.remove();
        mm.close();
        arena.close();
        Files.deleteIfExists(swap);
    }

    @Benchmark
    public long pinUnpin1GiB() {
        PinnedPages p = as.pinUserPages(big, GIB, true);
        long first = p.pfn(0);
        p.unpin(true);
        return first;
    }

    @Benchmark
    public MemorySegment refFill1GiB() {
        return ref.fill((byte) 1);
    }

    @Benchmark
    public long hmmRangeFault2MiB() {
        range.notifierSeq = notifier.readBegin();
        as.hmmRangeFault(range);
        return range.hmmPfns[511];
    }

    @Benchmark
    public MemorySegment refFill2MiB() {
        return ref.asSlice(0, TWO_MIB).fill((byte) 2);
    }
}
