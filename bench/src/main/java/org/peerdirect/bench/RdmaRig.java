package org.peerdirect.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

import org.peerdirect.hca.cx3.ConnectX3Board;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.ib.core.peer.PeerMemoryController;
import org.peerdirect.ib.core.umem.impl.UmemCore;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.rdma.RcConnect;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.ib.core.uverbs.IbDevice;
import org.peerdirect.mlx4.Mlx4Device;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;

/**
 * The machine the RDMA data-path benchmarks run on (after the mlx4 tests' {@code Lab}): memory
 * without poisoning, an IOMMU, one fabric, two HCA models (dev0, dev1) with their driver on top —
 * ConnectX-3 models with mlx4 ({@code "mlx4"}: the engine's queues are Java objects), or
 * ConnectX-4 models with mlx5 ({@code "mlx5"}: WQEs and CQEs are bytes in the process's memory,
 * fetched and written by DMA, doorbells by MMIO, as on real hardware) — one process. Each side has a context, a PD and one registered, populated buffer;
 * {@link #conns} RC connections link dev0 to dev1, each QP with its own CQ, moved RESET, INIT,
 * RTR, RTS as {@code ibv_rc_pingpong} does. {@link #close} releases everything.
 */
final class RdmaRig implements AutoCloseable {

    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC;

    /** One side: its context, PD and registered buffer. */
    final class Side {
        final IbvContext ctx;
        final IbvPd pd;
        final long buf;
        final long bufSize;
        final IbvMr mr;
        final int lid;

        Side(IbDevice dev, long bufSize, boolean inGpu) {
            this(dev, bufSize, inGpu, false);
        }

        /** With {@code dmabuf}: the GPU buffer exported (cuMemGetHandleForAddressRange) and registered as a dma-buf MR. */
        Side(IbDevice dev, long bufSize, boolean inGpu, boolean dmabuf) {
            this.bufSize = bufSize;
            ctx = dev.open(proc);
            pd = ctx.allocPd();
            if (inGpu) {
                buf = rm.cuMemAlloc(proc, bufSize); // GPU memory: registered through nv_mem, reached through BAR1
            } else {
                buf = proc.mmap(bufSize);
                proc.populate(buf, bufSize, true);
            }
            if (dmabuf) {
                int fd = rm.cuMemGetHandleForAddressRange(proc, buf, bufSize);
                try {
                    mr = pd.regDmabufMr(0, bufSize, buf, fd, RW);
                } finally {
                    try {
                        proc.close(fd); // the MR's attachment holds the buffer
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }
            } else {
                mr = pd.regMr(buf, bufSize, RW | (odp ? IbAccess.ON_DEMAND : 0));
            }
            lid = ctx.queryPort(1).lid();
        }
    }

    /** One RC connection: a QP and its CQ on each side (a on dev0, b on dev1). */
    static final class Conn {
        final IbvCq acq;
        final IbvQp aqp;
        final IbvCq bcq;
        final IbvQp bqp;

        Conn(IbvCq acq, IbvQp aqp, IbvCq bcq, IbvQp bqp) {
            this.acq = acq;
            this.aqp = aqp;
            this.bcq = bcq;
            this.bqp = bqp;
        }
    }

    /** The GPU of "mlx5-gpu" (b's buffer), else null. */
    org.peerdirect.gpu.model.GpuBoard board;
    org.peerdirect.gpu.nvidia.NvidiaRm rm;
    org.peerdirect.peermem.PeerMemoryRegistration nvReg;
    final Path swap;
    final Mm mm;
    final Iommu iommu;
    final Fabric fabric = new Fabric();
    final PeerMemoryController controller;
    final UmemCore umems;
    /** The HCAs' PCI functions; the bus gives each its IOMMU domain. Warnings (mappings left at removal) are leaks. */
    final java.util.List<String> busWarnings = new java.util.concurrent.CopyOnWriteArrayList<>();
    final StandalonePciBus bus;
    /** "mlx4" or "mlx5". */
    final String driver;
    final Mlx4Device[] devs = new Mlx4Device[2];
    final ConnectX4Device[] cx4 = new ConnectX4Device[2];
    final Mlx5CoreDev[] mlx5 = new Mlx5CoreDev[2];
    final Mlx5IbDev[] mlx5ib = new Mlx5IbDev[2];
    /** The core's devices over the drivers' (what users open). */
    final IbDevice[] ib = new IbDevice[2];
    final AddressSpace proc;
    final Side a;
    final Side b;
    final Conn[] conns;

    /**
     * @param memory    bytes of simulated physical memory
     * @param bufSize   bytes of the registered buffer on each side
     * @param nconns    RC connections dev0 to dev1
     * @param queueSize send and receive queue depth and CQ size of every QP
     */
    RdmaRig(long memory, long bufSize, int nconns, int queueSize) throws Exception {
        this("mlx4", memory, bufSize, nconns, queueSize);
    }

    /** Both sides' buffers registered on demand (populated first, so the registration's snapshot maps them all). */
    final boolean odp;
    /** Two Ethernet (RoCE v2) devices connected by GID: "mlx5-roce" and "mlx5-wire". */
    final boolean roce;

    /** @param driver "mlx4" (ConnectX-3 models), "mlx5" (ConnectX-4 models) or "mlx5-odp" (mlx5 with ODP MRs) */
    RdmaRig(String driver, long memory, long bufSize, int nconns, int queueSize) throws Exception {
        if (!driver.equals("mlx4") && !driver.equals("mlx5") && !driver.equals("mlx5-odp") && !driver.equals("mlx5-gpu")
                && !driver.equals("mlx5-gpu-inval") && !driver.equals("mlx5-gpu-dmabuf") && !driver.equals("mlx5-roce")
                && !driver.equals("mlx5-wire")) {
            throw new IllegalArgumentException("driver is mlx4, mlx5, mlx5-odp, mlx5-gpu, mlx5-gpu-inval, mlx5-gpu-dmabuf, mlx5-roce or "
                    + "mlx5-wire, not " + driver);
        }
        // mlx5-roce: two ConnectX-6 Dx (Ethernet) on the in-JVM fabric, connected by GID; mlx5-wire: the same two with
        // their ports joined by a UDP tunnel on the loopback (RoCEv2 frames, ICRC, ACKs)
        this.roce = driver.equals("mlx5-roce") || driver.equals("mlx5-wire");
        boolean wire = driver.equals("mlx5-wire");
        this.odp = driver.equals("mlx5-odp");
        // mlx5-gpu-inval: nv_mem is the invalidating client (persistent_api_support=0): a cudaFree revokes the MRs
        boolean gpuInval = driver.equals("mlx5-gpu-inval");
        // mlx5-gpu-dmabuf: b's GPU buffer registered as a dma-buf MR (ibv_reg_dmabuf_mr), not through nv_mem
        boolean gpuDmabuf = driver.equals("mlx5-gpu-dmabuf");
        boolean gpu = driver.equals("mlx5-gpu") || gpuInval || gpuDmabuf;
        driver = odp || gpu || roce ? "mlx5" : driver;
        this.driver = driver;
        swap = Files.createTempFile("pd-bench-swap", "");
        mm = new Mm(memory, false, swap, 16L << 20);
        iommu = new Iommu(mm);
        controller = new PeerMemoryController(null, null);
        umems = new UmemCore(controller);
        bus = new StandalonePciBus(iommu, busWarnings::add);
        for (int i = 0; i < 2; i++) {
            if (driver.equals("mlx4")) {
                devs[i] = new Mlx4Device("mlx4_" + i, bus.register(ConnectX3Board.onFabric(i, fabric, 1).spec()), mm, umems);
                ib[i] = new IbDevice(devs[i]);
            } else {
                cx4[i] = roce ? new ConnectX4Device("ConnectX-6 Dx", ConnectX4Device.DEVICE_CONNECTX6DX, fabric)
                        : new ConnectX4Device("ConnectX-4", ConnectX4Device.DEVICE_CONNECTX4, fabric);
                mlx5[i] = new Mlx5CoreDev("mlx5_" + i, bus.register(cx4[i].spec()), mm, new Mlx5CoreDev.Settings(10_000, 2_000, 2_000));
                mlx5[i].load();
                mlx5ib[i] = new Mlx5IbDev(mlx5[i], umems);
                ib[i] = new IbDevice(mlx5ib[i]);
            }
        }
        if (wire) {
            org.peerdirect.hca.wire.UdpTunnelLink[] l = org.peerdirect.hca.wire.UdpTunnelLink.pair("bench-a", "bench-b");
            for (int i = 0; i < 2; i++) {
                cx4[i].attachWire(1, l[i], 10 << 24 | 99 << 16 | i + 1, 0x0200_0a63_0000L | i + 1, 9000);
            }
        }
        proc = mm.createProcess("rdma-bench");
        proc.setMemlockLimit(1L << 40);
        if (gpu) { // b's buffer in a GPU's memory: an A100 model on the bus, the RM, persistent nv_mem
            // 2 GiB of video memory and BAR1, committed only where touched
            board = new org.peerdirect.gpu.model.GpuBoard("NVIDIA A100-PCIE-40GB", 2L << 30, 2L << 30);
            rm = new org.peerdirect.gpu.nvidia.NvidiaRm(mm, bus.register(board.spec()), 0);
            nvReg = controller.register(new org.peerdirect.gpu.peermem.NvPeerMem("nv_mem", () -> java.util.List.of(rm), !gpuInval, gpuInval),
                    gpuInval);
        }
        a = new Side(ib[0], bufSize, false);
        b = new Side(ib[1], bufSize, gpu, gpuDmabuf);
        conns = new Conn[nconns];
        for (int i = 0; i < nconns; i++) {
            IbvCq acq = a.ctx.createCq(queueSize, null);
            IbvQp aqp = a.pd.createQp(initAttr(acq, queueSize));
            IbvCq bcq = b.ctx.createCq(queueSize, null);
            IbvQp bqp = b.pd.createQp(initAttr(bcq, queueSize));
            conns[i] = new Conn(acq, aqp, bcq, bqp);
            if (roce) {
                byte[] ga = org.peerdirect.ib.core.verbs.IbvGid.parse(a.ctx.queryGid(1, 0));
                byte[] gb = org.peerdirect.ib.core.verbs.IbvGid.parse(b.ctx.queryGid(1, 0));
                new RcConnect().access(RW).minRnrTimer(1).timeout(12, 7).gid(gb).connect(aqp, 0, bqp.qpNum());
                new RcConnect().access(RW).minRnrTimer(1).timeout(12, 7).gid(ga).connect(bqp, 0, aqp.qpNum());
            } else {
                connectOne(aqp, a.lid, bqp.qpNum(), b.lid);
                connectOne(bqp, b.lid, aqp.qpNum(), a.lid);
            }
        }
    }

    private static IbvQpInitAttr initAttr(IbvCq cq, int queueSize) {
        IbvQpInitAttr x = new IbvQpInitAttr();
        x.sendCq = cq;
        x.recvCq = cq;
        x.qpType = IbvQpType.RC;
        x.maxSendWr = queueSize;
        x.maxRecvWr = queueSize;
        x.maxSendSge = 1;
        x.maxRecvSge = 1;
        x.maxInlineData = 256;
        return x;
    }

    /** RESET → INIT → RTR → RTS; RNR retry forever (7), RNR timer and transport timeouts short. */
    private static void connectOne(IbvQp me, int myLid, int peerQpn, int peerLid) {
        new RcConnect().access(RW).minRnrTimer(1).timeout(4, 3).connect(me, peerLid, peerQpn);
    }

    /**
     * Spins on {@code cq} until one completion arrives in {@code wc[0]}; fails on a CQ error or an
     * unsuccessful completion. Allocates nothing on the success path.
     */
    static IbvWc pollOne(IbvCq cq, IbvWc[] wc) {
        int k;
        while ((k = cq.poll(1, wc)) == 0) {
            Thread.onSpinWait();
        }
        if (k < 0) {
            throw new IllegalStateException("CQ in error (overrun or device gone)");
        }
        IbvWc c = wc[0];
        if (c.status != IbvWcStatus.SUCCESS) {
            throw new IllegalStateException("completion failed: " + c);
        }
        return c;
    }

    @Override
    public void close() throws Exception {
        try {
            for (Conn c : conns) {
                if (c != null) {
                    c.aqp.destroy();
                    c.bqp.destroy();
                    c.acq.destroy();
                    c.bcq.destroy();
                }
            }
            for (Side s : new Side[] {a, b}) {
                if (s != null) {
                    s.mr.dereg();
                    s.pd.dealloc();
                    s.ctx.close();
                }
            }
            if (rm != null) {
                rm.cuMemFree(proc, b.buf);
                nvReg.unregister();
            }
        } finally {
            for (int i = 0; i < devs.length; i++) {
                if (ib[i] != null) {
                    ib[i].disassociate();
                }
                if (devs[i] != null) {
                    devs[i].removeHardware(true);
                }
                if (mlx5ib[i] != null) {
                    mlx5ib[i].close(); // the mkey cache and the UMR QP
                }
                if (mlx5[i] != null) {
                    mlx5[i].unload(); // every firmware page taken back, DISABLE_HCA last
                    cx4[i].close();
                }
            }
            if (rm != null && !rm.shutdown().isEmpty()) {
                busWarnings.add("the GPU still holds video memory or BAR1 slots");
            }
            bus.close(); // the functions leave the bus with their IOMMU domains
            if (board != null) {
                board.close();
            }
            long leaked = busWarnings.size();
            controller.close(Duration.ofSeconds(1));
            long pinned = proc.pinnedPages();
            proc.exit();
            long pinnedFrames = mm.pinnedFrames();
            long busy = mm.totalFrames() - mm.freeFrames();
            mm.close();
            Files.deleteIfExists(swap);
            if (leaked != 0 || pinned != 0 || pinnedFrames != 0 || busy != 0) {
                throw new IllegalStateException(String.format(
                        "teardown leak: %d function(s) with IOMMU pages still mapped, %d page(s) charged to memlock, %d frame(s) pinned, %d frame(s) not free",
                        leaked, pinned, pinnedFrames, busy));
            }
        }
    }

    /**
     * Sets {@code wr} up as an RDMA WRITE of {@code size} bytes from a's buffer to b's, posts it
     * once signaled and checks the bytes arrived (the benchmarks' sanity write before timing).
     */
    void firstWrite(IbvSendWr wr, int size, IbvQp qp, IbvCq cq, IbvWc[] wc) {
        byte[] data = new byte[size];
        for (int i = 0; i < size; i++) {
            data[i] = (byte) (i * 13 + 1);
        }
        proc.write(a.buf, data, 0, size);
        wr.sge(a.buf, size, a.mr.lkey());
        wr.opcode = org.peerdirect.ib.core.verbs.IbvWrOpcode.RDMA_WRITE;
        wr.remoteAddr = b.buf;
        wr.rkey = b.mr.rkey();
        wr.sendFlags = IbvSendWr.SEND_SIGNALED;
        qp.postSend(wr);
        pollOne(cq, wc);
        byte[] got = new byte[size];
        if (rm != null) {
            rm.cuMemcpyDtoH(proc, got, 0, b.buf, size);
        } else {
            proc.read(b.buf, got, 0, size);
        }
        if (!java.util.Arrays.equals(data, got)) {
            throw new IllegalStateException("RDMA WRITE did not move the bytes");
        }
    }
}
