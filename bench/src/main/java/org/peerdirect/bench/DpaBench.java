package org.peerdirect.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
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
import org.peerdirect.bench.dpa.BenchDevStubs;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;

/**
 * Issue 42's FlexIO figures on a BlueField-3 (mlx5_core and mlx5_ib, a user process, FlexIO's host
 * library over DevX), each beside its reference in the same run:
 * <ul>
 * <li>{@code processCall}: {@code flexio_process_call} of a two-argument RPC that adds them, host
 *     to DPA and back; its reference is {@link PingPongBench}'s RC round trip ({@code rc}) run in the
 *     same JMH command (the host-to-host small-message round trip);</li>
 * <li>{@code host2devMemcpy64k}: {@code flexio_host2dev_memcpy} of 64 KiB into the process heap
 *     (the runtime's loopback RC QP, RDMA WRITE through the heap's DUMEM mkey, the IOMMU on the host
 *     side); its reference {@code segmentCopy64k}: {@code MemorySegment.copy} of 64 KiB.</li>
 * </ul>
 * Wall time only: the DPA's virtual cycles of an activation are what {@code dpa:eus} shows; no
 * hardware latency is invented here.
 *
 * <pre>./peerdirect bench -f 1 'DpaBench|PingPongBench.rc'</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class DpaBench {

    static final int COPY = 64 * 1024;

    /** A host with one BlueField-3 and a FlexIO process of {@code bench_dpa}. */
    @State(Scope.Benchmark)
    public static class Host {
        Path dir;
        Mm mm;
        StandalonePciBus bus;
        IbCore core;
        ConnectX4Device bf3;
        Mlx5CoreDev mlx5;
        Mlx5IbDev ib;
        IbvContext ctx;
        AddressSpace proc;
        FlexioProcess process;
        long haddr;
        long daddr;
        long a;

        @Setup(Level.Trial)
        public void up() throws Exception {
            dir = Files.createTempDirectory("peerdirect-dpabench");
            mm = new Mm(256L << 20, true, dir.resolve("swap"), 1 << 20);
            bus = new StandalonePciBus(new Iommu(mm));
            core = new IbCore(null);
            bf3 = new ConnectX4Device(ConnectX4Device.modelName(ConnectX4Device.DEVICE_BLUEFIELD3),
                    ConnectX4Device.DEVICE_BLUEFIELD3, new Fabric());
            mlx5 = new Mlx5CoreDev("mlx5_0", bus.register(bf3.spec()), mm, Mlx5CoreDev.Settings.DEFAULT);
            mlx5.load();
            ib = new Mlx5IbDev(mlx5, core.umems());
            IbvDevice dev = core.register(ib);
            proc = mm.createProcess("dpa-bench");
            proc.setMemlockLimit(128L << 20);
            ctx = dev.open(proc);
            process = FlexioProcess.create(ctx, BenchDevStubs.APP, new FlexioProcess.Attr(1 << 20, Duration.ofSeconds(30)));
            haddr = proc.mmap(COPY);
            for (long off = 0; off < COPY; off += 4096) {
                proc.writeLong(haddr + off, off); // touched: the copy measures the transfer, not first faults
            }
            daddr = process.bufDevAlloc(COPY);
            if (daddr == 0) {
                throw new IllegalStateException("no 64 KiB in the DPA heap");
            }
            if (process.call(BenchDevStubs.ADD, 40L, 2L) != 42) {
                throw new IllegalStateException("the RPC does not add");
            }
        }

        @TearDown(Level.Trial)
        public void down() throws Exception {
            process.bufDevFree(daddr);
            process.destroy();
            ctx.close();
            proc.munmap(haddr, COPY);
            core.unregister(ib);
            ib.close();
            mlx5.unload();
            proc.exit();
            mm.close();
        }
    }

    /** The reference copy's two 64 KiB segments. */
    @State(Scope.Benchmark)
    public static class Copy {
        final Arena arena = Arena.ofShared();
        final MemorySegment src = arena.allocate(COPY, 64);
        final MemorySegment dst = arena.allocate(COPY, 64);

        @TearDown(Level.Trial)
        public void down() {
            arena.close();
        }
    }

    @Benchmark
    public long processCall(Host h) {
        return h.process.call(BenchDevStubs.ADD, h.a++, 1L);
    }

    @Benchmark
    public void host2devMemcpy64k(Host h) {
        h.process.host2devMemcpy(h.haddr, COPY, h.daddr);
    }

    @Benchmark
    public MemorySegment segmentCopy64k(Copy c) {
        MemorySegment.copy(c.src, 0, c.dst, 0, COPY);
        return c.dst;
    }
}
