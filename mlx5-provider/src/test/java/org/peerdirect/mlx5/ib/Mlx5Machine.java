package org.peerdirect.mlx5.ib;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;

/**
 * The machine the mlx5 verbs tests run on: memory with poisoning, an IOMMU, a PCI bus, ib-core,
 * ConnectX-4+ models on one fabric with mlx5_core and mlx5_ib on each (named {@code mlx5_i}),
 * and one process. {@link #startMachine} builds it, {@link #stopMachine} takes it down in the
 * driver's order and says in words what was left behind (the tests assert the list is empty, or
 * report it after a failed property).
 */
abstract class Mlx5Machine {

    Mm mm;
    Iommu iommu;
    StandalonePciBus bus;
    IbCore core;
    final List<ConnectX4Device> models = new ArrayList<>();
    final List<PciFunction> fns = new ArrayList<>();
    final List<Mlx5CoreDev> cores = new ArrayList<>();
    final List<Mlx5IbDev> ibs = new ArrayList<>();
    final List<IbvDevice> devs = new ArrayList<>();
    /** Devices a test hot-unplugged: their firmware was powered down holding the pages the driver reclaimed locally. */
    final Set<Integer> unplugged = new HashSet<>();
    AddressSpace proc;
    /** The sysfs tree ib-core publishes into, when a test sets it before {@link #startMachine}; null: none. */
    org.peerdirect.kernel.sysfs.Sysfs sysfs;

    /** One model per PCI device id ({@link ConnectX4Device#DEVICE_CONNECTX4}, {@code _CONNECTX6DX} or {@code _BLUEFIELD3}), each bound and registered. */
    void startMachine(Path tmp, String procName, int... deviceIds) {
        mm = new Mm(64L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        core = new IbCore(sysfs);
        Fabric fabric = new Fabric();
        for (int i = 0; i < deviceIds.length; i++) {
            ConnectX4Device m = new ConnectX4Device(ConnectX4Device.modelName(deviceIds[i]), deviceIds[i], fabric);
            PciFunction fn = bus.register(m.spec());
            // the health poll at Linux's 2 s: at 200 ms a device model starved on a loaded 2-core
            // machine was declared dead (counter stuck for MAX_MISSES polls); no test here needs a quick verdict
            Mlx5CoreDev c = new Mlx5CoreDev("mlx5_" + i, fn, mm, new Mlx5CoreDev.Settings(10_000, 2_000, 2_000));
            c.load();
            Mlx5IbDev ib = new Mlx5IbDev(c, core.umems());
            models.add(m);
            fns.add(fn);
            cores.add(c);
            ibs.add(ib);
            devs.add(core.register(ib));
        }
        proc = mm.createProcess(procName);
        proc.setMemlockLimit(64L << 20);
    }

    /**
     * Unregisters every IB device (disassociation destroys every object by command while the
     * core is up), closes its mkey cache and UMR QP, unloads every core, ends the process and
     * closes the machine. Returns what was left behind: driver DMA pages, pages the firmware
     * still holds (but for unplugged devices), IOMMU violations or mappings, frames not free.
     */
    List<String> stopMachine() {
        for (Mlx5IbDev ib : ibs) {
            core.unregister(ib);
            ib.close();
        }
        List<String> leaks = new ArrayList<>();
        for (int i = 0; i < cores.size(); i++) {
            Mlx5CoreDev c = cores.get(i);
            c.unload();
            if (c.dmaPagesLive() != 0) {
                leaks.add(c.name() + ": " + c.dmaPagesLive() + " DMA pages of the driver live");
            }
            if (!unplugged.contains(i) && models.get(i).pagesHeld() != 0) {
                leaks.add(c.name() + ": the firmware holds pages: " + models.get(i).describe());
            }
            if (models.get(i).engineFailures() != 0) {
                leaks.add(c.name() + ": the engine failed " + models.get(i).engineFailures() + " time(s) on an exception of its own (see the log)");
            }
        }
        proc.exit();
        core.close();
        models.forEach(ConnectX4Device::close);
        bus.close();
        leaks.addAll(bus.warnings()); // a model's BAR write handler that threw, BAR memory not freed
        if (!iommu.audit().clean()) {
            leaks.add("IOMMU audit: " + iommu.audit());
        }
        if (mm.totalFrames() != mm.freeFrames()) {
            leaks.add((mm.totalFrames() - mm.freeFrames()) + " frames not free");
        }
        mm.close();
        return leaks;
    }

    /** {@code QUERY_QP} of QP {@code qpn} on device {@code dev}, by command: the output mailbox (the QPC at {@code QUERY_OUT_QPC}). */
    java.lang.foreign.MemorySegment queryQp(int dev, int qpn) {
        java.lang.foreign.MemorySegment in = Mlx5CoreDev.input(org.peerdirect.hca.cx4.ifc.Qp.QUERY_QP, 0, 16);
        org.peerdirect.hca.cx4.ifc.Pages.INDEX24.set(in, 0, qpn);
        return cores.get(dev).exec(in, org.peerdirect.hca.cx4.ifc.Qp.QUERY_OUT_LEN);
    }

    /** Writes a pattern of {@code n} bytes (seeded) at {@code va} of the process; returns it. */
    byte[] fill(long va, int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + seed);
        }
        proc.write(va, b, 0, n);
        return b;
    }

    byte[] read(long va, int n) {
        byte[] b = new byte[n];
        proc.read(va, b, 0, n);
        return b;
    }

    /** The rdma tools over this machine's devices. */
    org.peerdirect.rdma.tools.RdmaTools tools() {
        org.peerdirect.ib.core.verbs.IbvDeviceList list = new org.peerdirect.ib.core.verbs.IbvDeviceList() {
            public List<IbvDevice> devices() {
                return devs;
            }

            public IbvDevice device(String name) {
                return devs.stream().filter(d -> name == null || d.name().equals(name)).findFirst()
                        .orElseThrow(() -> new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.ENODEV, "no device " + name));
            }
        };
        return new org.peerdirect.rdma.tools.RdmaTools(list, mm);
    }

    static final int RW = org.peerdirect.ib.core.umem.IbAccess.LOCAL_WRITE | org.peerdirect.ib.core.umem.IbAccess.REMOTE_READ
            | org.peerdirect.ib.core.umem.IbAccess.REMOTE_WRITE | org.peerdirect.ib.core.umem.IbAccess.REMOTE_ATOMIC;

    /** One side of an RC connection in {@link #proc}: context, PD, CQ, RC QP and 1 MiB of registered host memory. */
    final class RcEnd {
        final IbvContext ctx;
        final IbvPd pd;
        final IbvCq cq;
        final IbvQp qp;
        final long buf;
        final IbvMr mr;

        RcEnd(int dev) {
            ctx = devs.get(dev).open(proc);
            pd = ctx.allocPd();
            cq = ctx.createCq(256, null);
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.qpType = IbvQpType.RC;
            a.maxSendWr = 64;
            a.maxRecvWr = 64;
            qp = pd.createQp(a);
            buf = proc.mmap(1 << 20);
            proc.populate(buf, 1 << 20, true);
            mr = pd.regMr(buf, 1 << 20, RW);
        }

        void close() {
            mr.dereg();
            qp.destroy();
            cq.destroy();
            pd.dealloc();
            ctx.close();
            proc.munmap(buf, 1 << 20);
        }
    }

    /** a (host memory, device 0) and b (device 1) connected both ways. */
    RcEnd[] pair() {
        RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
        connect(p);
        return p;
    }

    /** (Re)connects both QPs from any state: RESET, then RESET → RTS towards each other. */
    static void connect(RcEnd[] p) {
        connect(p, RW);
    }

    /** {@link #connect(RcEnd[])} with the QPs' access flags {@code qpAccess}. */
    static void connect(RcEnd[] p, int qpAccess) {
        org.peerdirect.rdma.RcConnect c = new org.peerdirect.rdma.RcConnect().access(qpAccess).minRnrTimer(1).timeout(14, 7);
        for (int k = 0; k < 2; k++) {
            org.peerdirect.ib.core.verbs.IbvQpAttr r = new org.peerdirect.ib.core.verbs.IbvQpAttr();
            r.qpState = org.peerdirect.ib.core.verbs.IbvQpState.RESET;
            p[k].qp.modify(r, org.peerdirect.ib.core.verbs.IbvQpAttr.STATE);
        }
        for (int k = 0; k < 2; k++) {
            c.connect(p[k].qp, p[1 - k].ctx.queryPort(1).lid(), p[1 - k].qp.qpNum());
        }
    }

    static IbvSendWr write(RcEnd from, long src, int len, long remote, int rkey) {
        IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, src, len, from.mr.lkey(), 1);
        w.remoteAddr = remote;
        w.rkey = rkey;
        return w;
    }
}
