package org.peerdirect.doca.dpa;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;

/**
 * The machine DOCA DPA's and DOCA RDMA's tests run on (doca-rdma takes it from doca-dpa's test-jar): a BlueField-3 ({@code mlx5_0}) and a ConnectX-6 Dx
 * ({@code mlx5_1}, no DPA) with mlx5_core and mlx5_ib, or {@code n} BlueField-3s ({@code mlx5_0..n-1}, on one fabric) and the
 * ConnectX-6 Dx after them ({@code mlx5_n}) for the multi-device scenarios (all-to-all), and one user process, as flexio's
 * {@code FlexioMachine} and doca-core's {@code DocaLab} build them. {@link #close} takes it down in
 * the driver's order and fails with what was left: a verbs context open, a DevX or DPA object in
 * the firmware, driver DMA pages, firmware pages, an IOMMU fault or mapping, a frame not free.
 */
public final class DpaLab implements AutoCloseable {

    final Mm mm;
    final Iommu iommu;
    final StandalonePciBus bus;
    final IbCore core;
    final List<ConnectX4Device> models = new ArrayList<>();
    final List<PciFunction> fns = new ArrayList<>();
    final List<Mlx5CoreDev> cores = new ArrayList<>();
    final List<Mlx5IbDev> ibs = new ArrayList<>();
    final List<IbvDevice> devs = new ArrayList<>();
    final AddressSpace proc;

    public DpaLab(Path tmp) {
        this(tmp, 1);
    }

    /** {@code bluefields} BlueField-3s ({@code mlx5_0..}), then the ConnectX-6 Dx; 96 MiB of memory per BlueField-3. */
    public DpaLab(Path tmp, int bluefields) {
        if (bluefields < 1) {
            throw new IllegalArgumentException("a DpaLab needs at least one BlueField-3, not " + bluefields);
        }
        mm = new Mm(96L * bluefields << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        core = new IbCore(null);
        Fabric fabric = new Fabric();
        int[] ids = new int[bluefields + 1];
        java.util.Arrays.fill(ids, ConnectX4Device.DEVICE_BLUEFIELD3);
        ids[bluefields] = ConnectX4Device.DEVICE_CONNECTX6DX;
        for (int i = 0; i < ids.length; i++) {
            ConnectX4Device m = new ConnectX4Device(ConnectX4Device.modelName(ids[i]), ids[i], fabric);
            PciFunction fn = bus.register(m.spec());
            Mlx5CoreDev c = new Mlx5CoreDev("mlx5_" + i, fn, mm, Mlx5CoreDev.Settings.DEFAULT);
            c.load();
            Mlx5IbDev ib = new Mlx5IbDev(c, core.umems());
            models.add(m);
            fns.add(fn);
            cores.add(c);
            ibs.add(ib);
            devs.add(core.register(ib));
        }
        proc = mm.createProcess("doca-dpa-host");
        proc.setMemlockLimit(64L << 20);
    }

    private IbvDeviceList deviceList() {
        return new IbvDeviceList() {
            @Override
            public List<IbvDevice> devices() {
                return devs;
            }

            @Override
            public IbvDevice device(String name) {
                return devs.stream().filter(d -> d.name().equals(name)).findFirst()
                        .orElseThrow(() -> new KernelException(KernelException.Errno.ENODEV, "no device " + name));
            }
        };
    }

    /** Opens {@code mlx5_<i>} in the process by its ibdev name, as the DOCA samples do. */
    public DocaDev open(int i) {
        List<DocaDevinfo> infos = DocaDevinfo.createList(proc, deviceList(), d -> fns.get(devs.indexOf(d)).bdf());
        return DocaDev.open(DocaDevinfo.byIbdevName(infos, "mlx5_" + i));
    }

    /** The BlueField-3's DPA objects in the firmware ({@code dpa:ps}). */
    public List<String> dpa() {
        return dpa(0);
    }

    /** The DPA objects in the firmware of {@code mlx5_<i>} (a BlueField-3). */
    public List<String> dpa(int i) {
        return models.get(i).dpaDescribe();
    }

    /** The memory-model checker's findings on {@code mlx5_<i>} ({@code dpa:mm}), for tests outside this package. */
    public List<String> dpaFindings(int i) {
        return models.get(i).dpaFindings();
    }

    /** The DPA crash reports on {@code mlx5_<i>} ({@code dpa:crash}), for tests outside this package. */
    public List<String> dpaCrashes(int i) {
        return models.get(i).dpaCrashes();
    }

    /** The memory-model findings of {@code mlx5_0}'s DPA ({@code dpa:mm}). */
    public List<String> findings() {
        return dpaFindings(0);
    }

    /** The DPA processes of {@code mlx5_0} that ended with an error ({@code dpa:crash}). */
    public List<String> crashes() {
        return dpaCrashes(0);
    }

    @Override
    public void close() {
        List<String> leaks = new ArrayList<>();
        for (int i = 0; i < devs.size(); i++) {
            if (core.openContexts(devs.get(i)) != 0) {
                leaks.add(devs.get(i).name() + ": " + core.openContexts(devs.get(i)) + " verbs context(s) still open (a doca_dev not closed)");
            }
            if (models.get(i).devxLive() != 0) {
                leaks.add(devs.get(i).name() + ": DevX objects left in the firmware: " + models.get(i).devxDescribe());
            }
        }
        for (Mlx5IbDev ib : ibs) {
            core.unregister(ib);
            ib.close();
        }
        for (int i = 0; i < cores.size(); i++) {
            Mlx5CoreDev c = cores.get(i);
            c.unload();
            if (c.dmaPagesLive() != 0) {
                leaks.add(c.name() + ": " + c.dmaPagesLive() + " DMA pages of the driver live");
            }
            if (models.get(i).pagesHeld() != 0) {
                leaks.add(c.name() + ": the firmware holds pages: " + models.get(i).describe());
            }
            if (models.get(i).engineFailures() != 0) {
                leaks.add(c.name() + ": the engine failed " + models.get(i).engineFailures() + " time(s)");
            }
        }
        proc.exit();
        core.close();
        models.forEach(ConnectX4Device::close);
        bus.close();
        leaks.addAll(bus.warnings());
        if (!iommu.audit().clean()) {
            leaks.add("IOMMU audit: " + iommu.audit());
        }
        if (mm.totalFrames() != mm.freeFrames()) {
            leaks.add((mm.totalFrames() - mm.freeFrames()) + " frames not free");
        }
        mm.close();
        if (!leaks.isEmpty()) {
            throw new AssertionError("left behind: " + leaks);
        }
    }
}
