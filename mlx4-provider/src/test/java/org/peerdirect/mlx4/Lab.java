package org.peerdirect.mlx4;


import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.peerdirect.hca.boards.SiliconView;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.rdma.RcConnect;
import org.peerdirect.testkit.HcaDriver;
import org.peerdirect.testkit.Machine;

/**
 * Two ConnectX-3 models on one fabric with the mlx4 driver on top, without OSGi, built by the
 * testkit's {@link Machine}; one process. {@link #close} ends every test with the machine's audit:
 * no IOMMU fault or violation, no mapping, no pin, every frame free.
 */
final class Lab implements AutoCloseable {

    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC;

    /** The drivers' devices (provider side) and the core's devices users open. */
    final List<Mlx4Device> devs = new ArrayList<>();
    final List<IbvDevice> ib = new ArrayList<>();
    final Machine machine;
    final Mm mm;
    final IbCore core;
    final AddressSpace proc;
    final List<IbvContext> contexts = new ArrayList<>();

    Lab(Path tmp, int devices) {
        machine = Machine.builder(tmp).hcas(devices, 1, (i, fn, umems, kmm) -> {
            Mlx4Device d = new Mlx4Device("mlx4_" + i, fn, kmm, umems);
            devs.add(d);
            return new HcaDriver.Probed(d, d::removeHardware);
        }).build();
        for (int i = 0; i < devices; i++) {
            ib.add(machine.device(i));
        }
        mm = machine.mm();
        core = machine.core();
        proc = machine.process("verbs-app");
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
        machine.remove(dev, surprise);
    }

    /** The QP context behind a user's QP, as the silicon holds it. */
    SiliconView.Qp hwQp(int dev, IbvQp qp) {
        return machine.engine(dev).qps().stream().filter(q -> q.qpn() == qp.qpNum()).findFirst().orElseThrow();
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

    /** The rdma:* tools over this lab's devices (those not removed), as the shell runs them. */
    org.peerdirect.rdma.tools.RdmaTools tools() {
        org.peerdirect.ib.core.verbs.IbvDeviceList list = new org.peerdirect.ib.core.verbs.IbvDeviceList() {
            public List<IbvDevice> devices() {
                return ib.stream().filter(d -> !d.removed()).map(d -> (IbvDevice) d).toList();
            }

            public IbvDevice device(String name) {
                return devices().stream().filter(d -> name == null || d.name().equals(name)).findFirst()
                        .orElseThrow(() -> new org.peerdirect.kernel.mm.KernelException(
                                org.peerdirect.kernel.mm.KernelException.Errno.ENODEV, "no device " + name));
            }
        };
        return new org.peerdirect.rdma.tools.RdmaTools(list, mm);
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
        machine.close(); // removes the devices, then the audit
    }
}
