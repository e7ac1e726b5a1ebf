package org.peerdirect.dpa.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

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

/**
 * A host with one BlueField-3 (mlx5_core and mlx5_ib bound, as mlx5-provider's machine builds it)
 * and a user process, for the samples' tests (flexio's FlexioMachine); {@link #close} takes it down in the
 * driver's order and checks what must hold after every test: no DevX or DPA object left in the
 * firmware, every firmware page back, the IOMMU audit clean, every frame free.
 */
final class SampleMachine implements AutoCloseable {

    final Mm mm;
    final Iommu iommu;
    final StandalonePciBus bus;
    final IbCore core;
    final ConnectX4Device bf3;
    final Mlx5CoreDev mlx5;
    final Mlx5IbDev ib;
    final IbvDevice dev;
    final AddressSpace proc;
    /** A ConnectX-4 beside it (mlx5_0): no DevX, no DPA, for the samples' failure paths. */
    final ConnectX4Device cx4;
    final Mlx5CoreDev mlx5Cx4;
    final Mlx5IbDev ibCx4;
    final IbvDevice devCx4;

    SampleMachine(Path tmp) {
        mm = new Mm(64L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        core = new IbCore(null);
        bf3 = new ConnectX4Device(ConnectX4Device.modelName(ConnectX4Device.DEVICE_BLUEFIELD3), ConnectX4Device.DEVICE_BLUEFIELD3,
                new Fabric());
        PciFunction fn = bus.register(bf3.spec());
        // Linux's health poll (2 s): a faster one declares the firmware stuck when the shared CI cores stall it
        mlx5 = new Mlx5CoreDev("mlx5_2", fn, mm, Mlx5CoreDev.Settings.DEFAULT);
        mlx5.load();
        ib = new Mlx5IbDev(mlx5, core.umems());
        dev = core.register(ib);
        Fabric ib0 = new Fabric();
        cx4 = new ConnectX4Device(ConnectX4Device.modelName(ConnectX4Device.DEVICE_CONNECTX4), ConnectX4Device.DEVICE_CONNECTX4, ib0);
        mlx5Cx4 = new Mlx5CoreDev("mlx5_0", bus.register(cx4.spec()), mm, Mlx5CoreDev.Settings.DEFAULT);
        mlx5Cx4.load();
        ibCx4 = new Mlx5IbDev(mlx5Cx4, core.umems());
        devCx4 = core.register(ibCx4);
        proc = mm.createProcess("dpa-sample-test");
        proc.setMemlockLimit(64L << 20);
    }

    IbvContext open() {
        return dev.open(proc);
    }

    /** The firmware's DPA objects, as {@code dpa:ps} lists them. */
    List<String> dpa() {
        return bf3.dpaDescribe();
    }

    @Override
    public void close() {
        assertEquals(0, bf3.devxLive(), "no DevX object left in the firmware: " + bf3.devxDescribe());
        core.unregister(ib);
        ib.close();
        core.unregister(ibCx4);
        ibCx4.close();
        List<String> leaks = new ArrayList<>();
        mlx5Cx4.unload();
        if (mlx5Cx4.dmaPagesLive() != 0 || cx4.pagesHeld() != 0 || cx4.engineFailures() != 0) {
            leaks.add("the ConnectX-4: " + mlx5Cx4.dmaPagesLive() + " DMA pages live; " + cx4.describe());
        }
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
        core.close();
        bf3.close();
        cx4.close();
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
