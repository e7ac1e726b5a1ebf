package org.peerdirect.doca;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;
import org.peerdirect.rdma.RcConnect;

/**
 * The machine DOCA Core's tests run on: memory, an IOMMU, a PCI bus, ib-core, {@code n}
 * BlueField-3 models on one fabric (RoCE) with mlx5_core and mlx5_ib on each ({@code mlx5_i}), and
 * one process per simulated host. The driver runs with its default timing (health polled every
 * 2 s, as Linux): a faster poll declared a starved model's firmware dead on a loaded machine. {@link #close} takes it down in the driver's order and fails
 * with what was left behind: a verbs context still open, driver DMA pages, pages the firmware
 * holds, an IOMMU fault or mapping, a frame not free.
 */
public final class DocaLab implements AutoCloseable {

    public final Mm mm;
    final Iommu iommu;
    final StandalonePciBus bus;
    public final IbCore core;
    final List<ConnectX4Device> models = new ArrayList<>();
    public final List<PciFunction> fns = new ArrayList<>();
    final List<Mlx5CoreDev> cores = new ArrayList<>();
    final List<Mlx5IbDev> ibs = new ArrayList<>();
    public final List<IbvDevice> devs = new ArrayList<>();
    final List<AddressSpace> procs = new ArrayList<>();

    public DocaLab(Path tmp, int devices) {
        this(tmp, devices, ConnectX4Device.DEVICE_BLUEFIELD3);
    }

    /** As {@link #DocaLab(Path, int)} with models of PCI device id {@code deviceId} ({@code ConnectX4Device.DEVICE_*}). */
    public DocaLab(Path tmp, int devices, int deviceId) {
        mm = new Mm(96L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        core = new IbCore(null);
        Fabric fabric = new Fabric();
        for (int i = 0; i < devices; i++) {
            ConnectX4Device m = new ConnectX4Device(deviceId == ConnectX4Device.DEVICE_BLUEFIELD3 ? "BlueField-3" : "ConnectX", deviceId, fabric);
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
    }

    /** A simulated host's process. */
    public AddressSpace process(String name) {
        AddressSpace p = mm.createProcess(name);
        p.setMemlockLimit(64L << 20);
        procs.add(p);
        return p;
    }

    /** The verbs device list of the machine. */
    public IbvDeviceList deviceList() {
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

    /** {@code doca_devinfo_create_list} for {@code p}, PCI addresses from the functions. */
    public List<DocaDevinfo> devinfos(AddressSpace p) {
        return DocaDevinfo.createList(p, deviceList(), d -> fns.get(devs.indexOf(d)).bdf());
    }

    /** Opens device {@code i} in {@code p} by its ibdev name, as the DOCA samples do. */
    public DocaDev open(AddressSpace p, int i) {
        return DocaDev.open(DocaDevinfo.byIbdevName(devinfos(p), "mlx5_" + i));
    }

    /** Fills {@code n} bytes at {@code va} of {@code p} with a seeded pattern; returns it. */
    public static byte[] fill(AddressSpace p, long va, int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + seed);
        }
        p.write(va, b, 0, n);
        return b;
    }

    public static byte[] read(AddressSpace p, long va, int n) {
        byte[] b = new byte[n];
        p.read(va, b, 0, n);
        return b;
    }

    /**
     * One side of an RC connection on a DOCA device: CQ, QP in the device's PD, and a 64 KiB
     * staging buffer registered for local use. {@link #close} destroys them.
     */
    public static final class End implements AutoCloseable {
        public final DocaDev dev;
        final IbvCq cq;
        final IbvQp qp;
        public final long buf;
        final IbvMr mr;
        final byte[] gid;

        public End(DocaDev dev) {
            this.dev = dev;
            IbvPd pd = dev.rdmaBridgeGetDevPd();
            cq = dev.ibvContext().createCq(64, null);
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.qpType = IbvQpType.RC;
            a.maxSendWr = 16;
            a.maxRecvWr = 16;
            qp = pd.createQp(a);
            AddressSpace p = dev.process();
            buf = p.mmap(1 << 16);
            p.populate(buf, 1 << 16, true);
            mr = pd.regMr(buf, 1 << 16, IbAccess.LOCAL_WRITE);
            gid = IbvGid.parse(dev.ibvContext().queryGid(1, 0));
        }

        /** Connects this end and {@code peer} both ways (RoCE: by GID), granting remote read, write and atomics. */
        public void connect(End peer) {
            int rw = IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC;
            new RcConnect().access(rw).gid(peer.gid).connect(qp, 0, peer.qp.qpNum());
            new RcConnect().access(rw).gid(gid).connect(peer.qp, 0, qp.qpNum());
        }

        /** Posts one signalled work request of {@code op} from the staging buffer and returns its completion. */
        public IbvWc post(IbvWrOpcode op, int len, long remoteAddr, int rkey, long compareAdd) {
            IbvSendWr w = new IbvSendWr().sge(buf, len, mr.lkey());
            w.opcode = op;
            w.wrId = 42;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = remoteAddr;
            w.rkey = rkey;
            w.compareAdd = compareAdd;
            qp.postSend(w);
            IbvWc[] wc = {new IbvWc()};
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (true) {
                int k = cq.poll(1, wc);
                if (k == 1) {
                    return wc[0];
                }
                if (k < 0 || System.nanoTime() > deadline) {
                    throw new AssertionError("no completion for " + op + " within 10 s (poll " + k + ")");
                }
                Thread.onSpinWait();
            }
        }

        @Override
        public void close() {
            qp.destroy();
            cq.destroy();
            mr.dereg();
            dev.process().munmap(buf, 1 << 16);
        }
    }

    @Override
    public void close() {
        List<String> leaks = new ArrayList<>();
        for (IbvDevice d : devs) {
            if (core.openContexts(d) != 0) {
                leaks.add(d.name() + ": " + core.openContexts(d) + " verbs context(s) still open (a doca_dev not closed)");
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
        procs.forEach(AddressSpace::exit);
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
