package org.peerdirect.testkit;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.boards.SiliconView;
import org.peerdirect.hca.cx3.ConnectX3Board;
import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.peermem.PeerMemoryRegistry;

/**
 * A machine for a plain JUnit 5 test, without OSGi: physical memory and swap, the IOMMU, {@code n}
 * ConnectX-3 models on one fabric with a driver bound to each, and the IB core. {@link #close}
 * takes everything down in order and runs the audit: no IOMMU fault, no violation, no mapping left,
 * no pin, every frame free, no request the engine failed on an exception of its own. A failed
 * audit throws {@link AssertionError} naming what leaked.
 *
 * <pre>{@code
 * try (Machine m = Machine.builder(tmp).hcas(2, 1, MY_DRIVER).build()) {
 *     AddressSpace p = m.process("app");
 *     IbvContext ctx = m.device(0).open(p);
 *     ...
 * }
 * }</pre>
 */
public final class Machine implements AutoCloseable {

    /** Builds a {@link Machine}. */
    public static final class Builder {
        private final Path dir;
        private long memory = 256L << 20;
        private long swap = 16L << 20;
        private int hcas;
        private int ports = 1;
        private HcaDriver driver;

        private Builder(Path dir) {
            this.dir = dir;
        }

        /** Physical memory (default 256 MiB). */
        public Builder memory(long bytes) {
            memory = bytes;
            return this;
        }

        /** Swap file size (default 16 MiB). */
        public Builder swap(long bytes) {
            swap = bytes;
            return this;
        }

        /** ConnectX-3 models, each with {@code portsEach} ports, probed by {@code d}. */
        public Builder hcas(int n, int portsEach, HcaDriver d) {
            if (n < 0 || portsEach < 1 || portsEach > 2 || n > 0 && d == null) {
                throw new IllegalArgumentException("hcas: " + n + " devices of " + portsEach + " ports need a driver and 1..2 ports");
            }
            hcas = n;
            ports = portsEach;
            driver = d;
            return this;
        }

        public Machine build() {
            return new Machine(this);
        }
    }

    /** A builder whose swap file goes into {@code dir} (a JUnit {@code @TempDir}). */
    public static Builder builder(Path dir) {
        return new Builder(dir);
    }

    private final Mm mm;
    private final Iommu iommu;
    private final Fabric fabric = new Fabric();
    private final IbCore core;
    private final List<IommuDomain> domains = new ArrayList<>();
    private final List<ConnectX3Board> boards = new ArrayList<>();
    /** Its warnings (a driver leaving DMA mappings at removal, a BAR write handler that threw) are reported by {@link #close}. */
    private final StandalonePciBus bus;
    private final List<HcaDriver.Probed> probed = new ArrayList<>();
    private final List<IbvDevice> devices = new ArrayList<>();
    private final boolean[] removed;
    private final List<AddressSpace> processes = new ArrayList<>();

    private Machine(Builder b) {
        mm = new Mm(b.memory, true, b.dir.resolve("swap"), b.swap);
        iommu = new Iommu(mm);
        core = new IbCore(null);
        removed = new boolean[b.hcas];
        bus = new StandalonePciBus(iommu);
        for (int i = 0; i < b.hcas; i++) {
            ConnectX3Board board = ConnectX3Board.onFabric(i, fabric, b.ports);
            boards.add(board);
            PciFunction fn = bus.register(board.spec()); // 0000:03:00.0, 0000:04:00.0, ...
            HcaDriver.Probed p = b.driver.probe(i, fn, core.umems(), mm);
            probed.add(p);
            devices.add(core.register(p.device()));
        }
    }

    public Mm mm() {
        return mm;
    }

    public Iommu iommu() {
        return iommu;
    }

    /** The IB core of this machine. */
    public IbCore core() {
        return core;
    }

    /** {@code ib_register_peer_memory_client} and the rest of the registry. */
    public PeerMemoryRegistry peerMemory() {
        return core.peerMemory();
    }

    /** {@code ib_umem_get}, for a test's own DMA device. */
    public UmemService umems() {
        return core.umems();
    }

    /**
     * Plugs another device model into the machine's PCI bus (a GPU, an SSD): its function, with an
     * IOMMU domain of its own; it leaves the bus, and its domain is audited, at {@link #close}.
     */
    public org.peerdirect.kernel.pci.PciFunction plug(org.peerdirect.kernel.pci.PciDeviceSpec spec) {
        return bus.register(spec);
    }

    /** The user-facing device of HCA {@code i}. */
    public IbvDevice device(int i) {
        return devices.get(i);
    }

    /** The driver's device of HCA {@code i}. */
    public IbDeviceOps driverDevice(int i) {
        return probed.get(i).device();
    }

    /**
     * What a lab sees of the silicon of HCA {@code i}: its counters and tables, its ports' cables.
     *
     * @throws IllegalStateException before the driver's {@code INIT_HCA} brought it up
     */
    public SiliconView engine(int i) {
        return boards.get(i).silicon();
    }

    /**
     * The ConnectX-3 board of HCA {@code i}: the silicon's own view for tests (the model's
     * counters and tables, {@link ConnectX3Board#describe}), no driver's.
     *
     * @since 0.6
     */
    public ConnectX3Board board(int i) {
        return boards.get(i);
    }

    public int hcaCount() {
        return boards.size();
    }

    /** A new process with a memlock limit of 1 TiB; it exits at {@link #close}. */
    public AddressSpace process(String name) {
        AddressSpace p = mm.createProcess(name);
        p.setMemlockLimit(1L << 40);
        processes.add(p);
        return p;
    }

    /** An IOMMU domain for a test's own DMA device; destroyed, and checked empty, at {@link #close}. */
    public IommuDomain domain(String device) {
        IommuDomain d = iommu.createDomain(device);
        domains.add(d);
        return d;
    }

    /**
     * A test's own DMA device over {@code d} (what a peer client or a dma-buf exporter maps for):
     * its name is the domain's.
     *
     * @since 0.3
     */
    public static org.peerdirect.kernel.dma.DmaDevice dmaDevice(IommuDomain d) {
        return new org.peerdirect.kernel.dma.DmaDevice() {
            @Override
            public String name() {
                return d.name();
            }

            @Override
            public org.peerdirect.kernel.dma.DmaMapper dma() {
                return d;
            }
        };
    }

    /**
     * Removes HCA {@code i} as its driver's remove function does: unregistered from the core
     * first (its users are disassociated), then the hardware torn down ({@code surprise}) or reset.
     */
    public void remove(int i, boolean surprise) {
        if (removed[i]) {
            return;
        }
        removed[i] = true;
        core.unregister(probed.get(i).device());
        probed.get(i).removeHardware().accept(surprise);
    }

    /** Takes the machine down and runs the audit. */
    @Override
    public void close() {
        List<String> leaks = new ArrayList<>();
        try {
            for (AddressSpace p : processes) {
                p.exit(); // closes the processes' contexts first (uverbs release)
            }
            for (int i = 0; i < boards.size(); i++) {
                SiliconView e = boards.get(i).siliconIfUp();
                if (e != null && e.engineFailures() != 0) {
                    leaks.add(e.name() + ": the engine failed " + e.engineFailures() + " time(s) on an exception of its own (see the log)");
                }
                remove(i, true);
            }
            bus.close(); // the functions leave the bus, their IOMMU domains with them
            leaks.addAll(bus.warnings());
            for (IommuDomain d : domains) {
                long left = iommu.destroyDomain(d);
                if (left != 0) {
                    leaks.add(left + " DMA mapping(s) left in " + d.name());
                }
            }
            core.close(Duration.ofSeconds(1));
            IommuAudit a = iommu.audit();
            if (a.faults() != 0 || !a.violationFree()) {
                leaks.add("IOMMU audit: " + a);
            }
            for (AddressSpace p : processes) {
                if (p.pinnedPages() != 0) {
                    leaks.add(p + ": " + p.pinnedPages() + " pages still charged to memlock");
                }
            }
            if (mm.pinnedFrames() != 0) {
                leaks.add(mm.pinnedFrames() + " frame(s) still pinned");
            }
            if (mm.freeFrames() != mm.totalFrames()) {
                leaks.add((mm.totalFrames() - mm.freeFrames()) + " frame(s) not free");
            }
        } finally {
            mm.close();
        }
        if (!leaks.isEmpty()) {
            throw new AssertionError("machine audit failed: " + String.join("; ", leaks));
        }
    }
}
