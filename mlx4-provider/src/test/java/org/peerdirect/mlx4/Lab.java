package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.peerdirect.hca.cx3.ConnectX3;
import org.peerdirect.hca.cx3.ConnectX3Board;
import org.peerdirect.hca.engine.Fabric;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.ib.core.uverbs.IbDevice;
import org.peerdirect.ib.core.peer.PeerMemoryController;
import org.peerdirect.ib.core.peer.UmemCore;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.rdma.RcConnect;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * Two ConnectX-3 models on one fabric with the mlx4 driver on top, without OSGi; one process.
 * {@link #close} ends every test with the audit: no IOMMU fault or violation, no mapping, no pin,
 * every frame free.
 */
final class Lab implements AutoCloseable {

    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC;

    final Mm mm;
    final Iommu iommu;
    final Fabric fabric = new Fabric();
    final PeerMemoryController controller = new PeerMemoryController(null, null);
    final UmemCore umems = new UmemCore(controller);
    /** The drivers' devices (provider side) and the core's devices users open. */
    final List<Mlx4Device> devs = new ArrayList<>();
    final List<IbDevice> ib = new ArrayList<>();
    final List<IommuDomain> domains = new ArrayList<>();
    final AddressSpace proc;
    final List<IbvContext> contexts = new ArrayList<>();

    Lab(Path tmp, int devices) {
        mm = new Mm(256L << 20, true, tmp.resolve("swap"), 16 << 20);
        iommu = new Iommu(mm.physical());
        for (int i = 0; i < devices; i++) {
            String bdf = String.format("0000:0%d:00.0", i + 3);
            IommuDomain domain = iommu.createDomain(bdf);
            domains.add(domain);
            HcaDevice engine = new HcaDevice(bdf, domain, fabric, 1);
            ConnectX3 hw = new ConnectX3Board(engine, ConnectX3Board.guid(i));
            Mlx4Device d = new Mlx4Device("mlx4_" + i, hw, umems);
            devs.add(d);
            ib.add(new IbDevice(d)); // what the core's registry does when the driver publishes it
        }
        proc = mm.createProcess("verbs-app");
        proc.setMemlockLimit(1L << 40);
    }

    IbvContext open(int dev) {
        IbvContext c = ib.get(dev).open(proc);
        contexts.add(c);
        return c;
    }

    /**
     * {@code mlx4_remove_one}: unregistered from the core (disassociation), then the hardware torn
     * down ({@code surprise}) or reset (driver unbind), as {@link Mlx4Driver} does.
     */
    void remove(int dev, boolean surprise) {
        ib.get(dev).disassociate();
        devs.get(dev).removeHardware(surprise);
    }

    /** The hardware QP behind a user's QP. */
    HwQp hwQp(int dev, IbvQp qp) {
        return devs.get(dev).engine().qps().stream().filter(q -> q.qpn() == qp.qpNum()).findFirst().orElseThrow();
    }

    /** One side of a connection: context, PD, CQ, QP and a registered buffer. */
    final class End {
        final IbvContext ctx;
        final IbvPd pd;
        final IbvCq cq;
        final IbvQp qp;
        final long buf;
        final IbvMr mr;
        final int lid;

        /** Another QP on an existing end's context, PD and buffer. */
        End(Lab lab, End base, IbvQp qp, IbvCq cq) {
            ctx = base.ctx;
            pd = base.pd;
            this.cq = cq;
            this.qp = qp;
            buf = base.buf;
            mr = base.mr;
            lid = base.lid;
        }

        End(int dev, long bufSize, IbvQpType type, int access) {
            ctx = open(dev);
            pd = ctx.allocPd();
            cq = ctx.createCq(256, null);
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.qpType = type;
            a.maxSendWr = 64;
            a.maxRecvWr = 64;
            a.maxSendSge = 4;
            a.maxRecvSge = 4;
            a.maxInlineData = 256;
            qp = pd.createQp(a);
            buf = proc.mmap(bufSize);
            proc.populate(buf, bufSize, true);
            mr = pd.regMr(buf, bufSize, access);
            lid = ctx.queryPort(1).lid();
        }
    }

    /** RESET → INIT → RTR → RTS for an RC pair, as ibv_rc_pingpong does. */
    static void connect(End a, End b, int rnrTimer, int rnrRetry, int timeout, int retry) {
        connectOne(a, b, rnrTimer, rnrRetry, timeout, retry);
        connectOne(b, a, rnrTimer, rnrRetry, timeout, retry);
    }

    static void connectOne(End me, End peer, int rnrTimer, int rnrRetry, int timeout, int retry) {
        new RcConnect().access(RW).minRnrTimer(rnrTimer).rnrRetry(rnrRetry).timeout(timeout, retry).connect(me.qp, peer.lid,
                peer.qp.qpNum());
    }

    /** Polls until {@code n} completions arrived (bounded: 20 s), returns them. */
    static List<IbvWc> await(IbvCq cq, int n) {
        List<IbvWc> out = new ArrayList<>();
        IbvWc[] wc = {new IbvWc(), new IbvWc(), new IbvWc(), new IbvWc()};
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (out.size() < n) {
            int k = cq.poll(Math.min(4, n - out.size()), wc);
            if (k < 0) {
                throw new AssertionError("CQ in error after " + out);
            }
            for (int i = 0; i < k; i++) {
                IbvWc c = new IbvWc();
                c.copyFrom(wc[i]);
                out.add(c);
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("only " + out.size() + " of " + n + " completions within 20 s: " + out);
            }
            Thread.onSpinWait();
        }
        return out;
    }

    @Override
    public void close() {
        for (IbvContext c : contexts) {
            c.close();
        }
        for (int i = 0; i < devs.size(); i++) {
            remove(i, true);
        }
        for (IommuDomain d : domains) {
            assertEquals(0, iommu.destroyDomain(d), "no DMA mapping left in " + d.name());
        }
        controller.close(Duration.ofSeconds(1));
        IommuAudit a = iommu.audit();
        assertEquals(0, a.faults(), "no IOMMU fault: " + a);
        assertTrue(a.violationFree(), "no IOMMU violation: " + a);
        assertEquals(0, proc.pinnedPages(), "memlock charge returned");
        proc.exit();
        assertEquals(0, mm.pinnedFrames(), "no pinned frame");
        assertEquals(mm.physical().nrFrames(), mm.physical().freeFrames(), "every frame free");
        mm.close();
    }
}
