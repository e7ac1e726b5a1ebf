package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.peerdirect.gpu.model.GpuBoard;
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.gpu.peermem.NvPeerMem;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;
import org.peerdirect.peermem.PeerMemoryRegistration;

/**
 * A host with one BlueField-3 (mlx5_core and mlx5_ib bound, as mlx5-provider's machine builds it)
 * and a user process (and, with {@link #gpu}, a GPU and its peer client), for the FlexIO host library's tests; {@link #close} takes it down in the
 * driver's order and checks what must hold after every test: no DevX or DPA object left in the
 * firmware, every firmware page back, the IOMMU audit clean, every frame free.
 */
final class FlexioMachine implements AutoCloseable {

    final Mm mm;
    final Iommu iommu;
    final StandalonePciBus bus;
    final IbCore core;
    final ConnectX4Device bf3;
    final Mlx5CoreDev mlx5;
    final Mlx5IbDev ib;
    final IbvDevice dev;
    final AddressSpace proc;

    FlexioMachine(Path tmp) {
        mm = new Mm(64L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        core = new IbCore(null);
        bf3 = new ConnectX4Device(ConnectX4Device.modelName(ConnectX4Device.DEVICE_BLUEFIELD3), ConnectX4Device.DEVICE_BLUEFIELD3,
                new Fabric());
        PciFunction fn = bus.register(bf3.spec());
        // Linux's health poll (2 s): a faster one declares the firmware stuck when the shared CI cores stall it
        mlx5 = new Mlx5CoreDev("mlx5_0", fn, mm, Mlx5CoreDev.Settings.DEFAULT);
        mlx5.load();
        ib = new Mlx5IbDev(mlx5, core.umems());
        dev = core.register(ib);
        proc = mm.createProcess("flexio-host");
        proc.setMemlockLimit(64L << 20);
    }

    IbvContext open() {
        return dev.open(proc);
    }

    /** The GPU peer, when {@link #gpu} added it: the board, its RM, nv_mem and its registration with the IB core. */
    GpuBoard board;
    NvidiaRm rm;
    NvPeerMem nv;
    PeerMemoryRegistration nvReg;

    /**
     * Adds a GPU on the same PCI bus (64 MiB of video memory, 32 MiB BAR1) and nv_mem, the
     * invalidating flavour (the RM's free callback invalidates, mlx5 revokes the mkey) or the
     * persistent one, as mlx5-provider's GPU tests build them; the process may pin 1 GiB.
     */
    FlexioMachine gpu(boolean persistent) {
        proc.setMemlockLimit(1L << 30);
        board = new GpuBoard("NVIDIA A100-PCIE-40GB", 64L << 20, 32L << 20);
        rm = new NvidiaRm(mm, bus.register(board.spec()), 0);
        nv = new NvPeerMem("nv_mem", () -> List.of(rm), persistent, !persistent);
        nvReg = core.peerMemory().register(nv, !persistent);
        return this;
    }

    /** The firmware's DPA objects, as {@code dpa:ps} lists them. */
    List<String> dpa() {
        return bf3.dpaDescribe();
    }

    @Override
    public void close() {
        assertEquals(0, bf3.devxLive(), "no DevX object left in the firmware: " + bf3.devxDescribe());
        List<String> leaks = new ArrayList<>();
        if (rm != null) {
            // the GPU's memory first: what a failed test left registered is deregistered by the
            // disassociation below, so nv_mem's unregister (which waits for them) cannot hang
            leaks.addAll(rm.shutdown());
        }
        core.unregister(ib);
        ib.close();
        mlx5.unload();
        if (mlx5.dmaPagesLive() != 0) {
            leaks.add(mlx5.dmaPagesLive() + " DMA pages of the driver live");
        }
        if (bf3.pagesHeld() != 0) {
            leaks.add("the firmware holds pages: " + bf3.describe());
        }
        if (bf3.engineFailures() != 0) {
            leaks.add("the engine failed " + bf3.engineFailures() + " time(s)");
        }
        proc.exit();
        if (nvReg != null) {
            try {
                if (!nvReg.unregister(java.time.Duration.ofSeconds(10))) {
                    leaks.add("nv_mem still held by a registration");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                leaks.add("interrupted unregistering nv_mem");
            }
            if (nv.inUse() != 0) {
                leaks.add("nv_mem in use " + nv.inUse());
            }
        }
        core.close();
        bf3.close();
        if (board != null) {
            board.close();
        }
        bus.close();
        leaks.addAll(bus.warnings());
        if (!iommu.audit().clean()) {
            leaks.add("IOMMU audit: " + iommu.audit());
        }
        if (mm.totalFrames() != mm.freeFrames()) {
            leaks.add((mm.totalFrames() - mm.freeFrames()) + " frames not free");
        }
        mm.close();
        assertEquals(List.of(), leaks, "nothing left behind");
    }
}
