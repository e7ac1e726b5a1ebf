package org.peerdirect.bench;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
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
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;

/**
 * The mlx5 command interface against the ConnectX-4 model. {@code nop} is one {@code NOP}
 * command's round trip once the device is up (entry and doorbell by MMIO, the firmware thread
 * reads it by DMA), completed by the command EQ's event and MSI-X ({@code mode=events}) or by
 * polling the entry's ownership bit ({@code mode=polling}, {@code mlx5_cmd_use_polling}, what
 * the driver does during bring-up and teardown). {@code loadUnload} is a whole bring-up in the
 * Linux order (ENABLE_HCA ... INIT_HCA, pages, EQs) and its teardown (every page taken back,
 * DISABLE_HCA) on one function, in milliseconds; each trial checks that the firmware holds no
 * page and the IOMMU audit is clean afterwards.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class Mlx5CommandBench {

    /** One machine with one ConnectX-4 model on a standalone bus. */
    abstract static class Machine {
        Path swap;
        Mm mm;
        Iommu iommu;
        StandalonePciBus bus;
        ConnectX4Device model;
        PciFunction fn;
        final Mlx5CoreDev.Settings settings = new Mlx5CoreDev.Settings(10_000, 2_000, 2_000);

        void boot() throws Exception {
            swap = Files.createTempFile("pd-bench-swap", "");
            mm = new Mm(64L << 20, false, swap, 16L << 20);
            iommu = new Iommu(mm);
            bus = new StandalonePciBus(iommu, w -> {
            });
            model = new ConnectX4Device("ConnectX-4", ConnectX4Device.DEVICE_CONNECTX4, new Fabric());
            fn = bus.register(model.spec());
        }

        void shutdown() throws Exception {
            long held = model.pagesHeld();
            model.close();
            bus.close();
            mm.close();
            Files.deleteIfExists(swap);
            if (held != 0) {
                throw new IllegalStateException("the firmware held " + held + " pages after the unload");
            }
            if (!iommu.audit().clean()) {
                throw new IllegalStateException("IOMMU audit after the bench: " + iommu.audit());
            }
        }
    }

    /** A loaded device whose commands complete by events or by polling. */
    @State(Scope.Benchmark)
    public static class Loaded extends Machine {
        @Param({"events", "polling"})
        public String mode;
        Mlx5CoreDev dev;

        @Setup(Level.Trial)
        public void setup() throws Exception {
            boot();
            dev = new Mlx5CoreDev("mlx5_0", fn, mm, settings);
            dev.load();
            if (mode.equals("polling")) {
                dev.cmdUsePolling();
            }
        }

        @TearDown(Level.Trial)
        public void tearDown() throws Exception {
            dev.unload();
            shutdown();
        }
    }

    /** A function with no driver loaded: each invocation brings it up and tears it down. */
    @State(Scope.Benchmark)
    public static class Bare extends Machine {
        int n;

        @Setup(Level.Trial)
        public void setup() throws Exception {
            boot();
        }

        @TearDown(Level.Trial)
        public void tearDown() throws Exception {
            shutdown();
        }
    }

    @Benchmark
    public MemorySegment nop(Loaded s) {
        return s.dev.exec(Mlx5CoreDev.input(Mlx5Cmd.NOP, 0, 16), 16);
    }

    @Benchmark
    @OutputTimeUnit(TimeUnit.MILLISECONDS)
    public int loadUnload(Bare s) {
        Mlx5CoreDev d = new Mlx5CoreDev("mlx5_" + s.n++, s.fn, s.mm, s.settings);
        d.load();
        int pages = d.pagesHeld();
        d.unload();
        if (d.dmaPagesLive() != 0) {
            throw new IllegalStateException(d.name() + ": " + d.dmaPagesLive() + " DMA pages live after the unload");
        }
        return pages;
    }
}
