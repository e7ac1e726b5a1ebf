package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;

import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import javax.inject.Inject;

import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.rdma.RcConnect;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * The data path inside Felix: mlx4-provider stopped in the middle of traffic (users get flush
 * errors and closed devices, no hang) and started again (traffic works again); example-peer-mem
 * stopped while an MR over its memory carries traffic (the stop waits until the MR is
 * deregistered; the traffic then ends in errors, never in writes to freed memory).
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class RdmaIT {

    private static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;
    private static final long WAIT_NS = 20_000_000_000L;

    @Inject
    BundleContext context;
    @Inject
    IbvDeviceList devices;
    @Inject
    Mm mm;
    @Inject
    Iommu iommu;
    @Inject
    org.peerdirect.kernel.sysfs.Sysfs sysfs;

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    /** The ConnectX-3 devices (this test drives mlx4; the mlx5 devices of the ConnectX-4+ models are there too). */
    private List<String> mlx4() {
        return devices.devices().stream().map(x -> x.name()).filter(n -> n.startsWith("mlx4_")).sorted().toList();
    }

    private static void waitFor(String what, java.util.function.BooleanSupplier c) {
        long deadline = System.nanoTime() + WAIT_NS;
        while (!c.getAsBoolean()) {
            assertTrue("timed out waiting for " + what, System.nanoTime() < deadline);
            Thread.onSpinWait();
        }
    }

    /** One side: context, PD, CQ, QP, buffer and MR in the shared process. */
    private final class End {
        final IbvContext ctx;
        final IbvPd pd;
        final IbvCq cq;
        final IbvQp qp;
        final long buf;
        final IbvMr mr;
        final int lid;

        End(AddressSpace p, String dev) {
            ctx = devices.device(dev).open(p);
            pd = ctx.allocPd();
            cq = ctx.createCq(64, null);
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            qp = pd.createQp(a);
            buf = p.mmap(1 << 16);
            mr = pd.regMr(buf, 1 << 16, RW);
            lid = ctx.queryPort(1).lid();
        }
    }

    private static void connect(End me, End peer) {
        new RcConnect().access(RW).minRnrTimer(1).timeout(4, 3).connect(me.qp, peer.lid, peer.qp.qpNum());
    }

    /** Writes until an error completion, an exception, or {@code stop}; returns what ended it. */
    private Thread traffic(End a, long dst, int rkey, AtomicBoolean stop, AtomicLong ok, AtomicReference<Object> end) {
        return Thread.ofPlatform().start(() -> {
            IbvSendWr w = new IbvSendWr().sge(a.buf, 4096, a.mr.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = dst;
            w.rkey = rkey;
            IbvWc[] wc = {new IbvWc()};
            try {
                while (!stop.get()) {
                    a.qp.postSend(w);
                    long deadline = System.nanoTime() + WAIT_NS;
                    int n;
                    while ((n = a.cq.poll(1, wc)) == 0) {
                        if (System.nanoTime() > deadline) {
                            end.set("no completion within 20 s");
                            return;
                        }
                        Thread.onSpinWait();
                    }
                    if (n < 0 || wc[0].status != IbvWcStatus.SUCCESS) {
                        end.set(n < 0 ? "CQ error" : wc[0].status);
                        return;
                    }
                    ok.incrementAndGet();
                }
                end.set("stopped");
            } catch (KernelException e) {
                end.set(e.errno());
            }
        });
    }

    @Test
    public void mlx4ProviderStoppedMidTrafficThenStartedAgain() throws Exception {
        providerStoppedMidTrafficThenStartedAgain("org.peerdirect.mlx4-provider", "mlx4_0", "mlx4_1");
    }

    /** The same with mlx5: mlx5_0 (a ConnectX-4, InfiniBand) writes to mlx4_0 across drivers; mlx5-provider stops. */
    @Test
    public void mlx5ProviderStoppedMidTrafficThenStartedAgain() throws Exception {
        providerStoppedMidTrafficThenStartedAgain("org.peerdirect.mlx5-provider", "mlx5_0", "mlx4_0");
    }

    /**
     * mlx5's ODP counters where users read them: {@code /sys/class/infiniband/mlx5_0/odp/} and the
     * {@code OdpStats} MXBean. An RDMA WRITE from mlx4_0 into an ODP MR on mlx5_0 faults once; both
     * views count it and list the MR with its key; after the deregistration the MR is gone from both.
     */
    @Test
    public void mlx5OdpCountersAreInSysfsAndJmx() throws Exception {
        waitFor("mlx5_0 and mlx4_0", () -> present("mlx5_0") && present("mlx4_0"));
        waitFor("the ODP counters of mlx5_0 in sysfs", () -> sysfs.exists("class/infiniband/mlx5_0/odp/page_faults"));
        javax.management.MBeanServer jmx = java.lang.management.ManagementFactory.getPlatformMBeanServer();
        javax.management.ObjectName name = new javax.management.ObjectName("org.peerdirect.mlx5:type=OdpStats,device=\"mlx5_0\"");
        long before = Long.parseLong(sysfs.read("class/infiniband/mlx5_0/odp/page_faults").trim());
        assertEquals(before, ((Long) jmx.getAttribute(name, "PageFaults")).longValue());
        AddressSpace p = mm.createProcess("itest-odp-counters");
        try {
            End a = new End(p, "mlx4_0");
            End b = new End(p, "mlx5_0");
            long odpBuf = p.mmap(1 << 16);
            IbvMr odp = b.pd.regMr(odpBuf, 1 << 16, RW | IbAccess.ON_DEMAND);
            connect(a, b);
            connect(b, a);
            IbvSendWr w = new IbvSendWr().sge(a.buf, 4096, a.mr.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = odpBuf + 8192;
            w.rkey = odp.rkey();
            a.qp.postSend(w);
            IbvWc[] wc = {new IbvWc()};
            waitFor("the write's completion", () -> a.cq.poll(1, wc) != 0);
            assertEquals(IbvWcStatus.SUCCESS, wc[0].status);
            long after = Long.parseLong(sysfs.read("class/infiniband/mlx5_0/odp/page_faults").trim());
            assertTrue("the fault counted in sysfs: " + before + " -> " + after, after > before);
            assertEquals(after, ((Long) jmx.getAttribute(name, "PageFaults")).longValue());
            String key = String.format("0x%x", odp.lkey());
            assertTrue(sysfs.read("class/infiniband/mlx5_0/odp/mrs"), sysfs.read("class/infiniband/mlx5_0/odp/mrs").contains(key));
            assertTrue(java.util.Arrays.stream((String[]) jmx.getAttribute(name, "Mrs")).anyMatch(l -> l.contains(key)));
            odp.dereg();
            assertFalse(sysfs.read("class/infiniband/mlx5_0/odp/mrs").contains(key));
        } finally {
            p.exit();
        }
    }

    private boolean present(String dev) {
        return devices.devices().stream().anyMatch(d -> d.name().equals(dev));
    }

    /** Traffic from {@code from} to {@code to}; the provider bundle of {@code from} stops under it, then starts again. */
    private void providerStoppedMidTrafficThenStartedAgain(String provider, String from, String to) throws Exception {
        waitFor(from + " and " + to, () -> present(from) && present(to));
        AddressSpace p = mm.createProcess("itest-rdma");
        p.setMemlockLimit(1L << 30);
        End a = new End(p, from);
        End b = new End(p, to);
        connect(a, b);
        connect(b, a);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong ok = new AtomicLong();
        AtomicReference<Object> end = new AtomicReference<>();
        Thread t = traffic(a, b.buf, b.mr.rkey(), stop, ok, end);
        waitFor("traffic flowing", () -> ok.get() > 100);
        Bundle driver = Distribution.bundle(context, provider);
        driver.stop();
        t.join(30_000);
        assertFalse("the traffic thread ended, no hang", t.isAlive());
        Object why = end.get();
        // whichever device goes first: its own QP flushed, EIO from the verb, the peer's QP gone
        // (transport retries exhausted) or its keys revoked
        assertTrue("traffic ended in an error, got " + why, why == IbvWcStatus.WR_FLUSH_ERR || why == KernelException.Errno.EIO
                || why == IbvWcStatus.RETRY_EXC_ERR || why == IbvWcStatus.REM_ACCESS_ERR);
        assertEquals(IbvQpState.ERR, a.qp.state());
        try {
            a.qp.postSend(new IbvSendWr().sge(a.buf, 8, a.mr.lkey()));
            throw new AssertionError("post on a removed device must fail");
        } catch (KernelException e) {
            assertEquals(KernelException.Errno.EIO, e.errno());
        }
        assertFalse(from + " is gone while its provider is stopped", present(from));
        try {
            a.pd.regMr(a.buf, 4096, RW);
            throw new AssertionError("regMr on a removed device must fail");
        } catch (KernelException e) {
            assertEquals(KernelException.Errno.EIO, e.errno());
        }
        a.ctx.close();
        b.ctx.close();

        driver.start();
        waitFor("the devices back", () -> present(from) && present(to));
        End c = new End(p, from);
        End d = new End(p, to);
        connect(c, d);
        connect(d, c);
        AtomicLong ok2 = new AtomicLong();
        AtomicReference<Object> end2 = new AtomicReference<>();
        AtomicBoolean stop2 = new AtomicBoolean();
        Thread t2 = traffic(c, d.buf, d.mr.rkey(), stop2, ok2, end2);
        waitFor("traffic flowing again", () -> ok2.get() > 100);
        stop2.set(true);
        t2.join(30_000);
        assertEquals("stopped", end2.get());
        c.ctx.close();
        d.ctx.close();
        p.exit();
        IommuAudit audit = iommu.audit();
        assertEquals("no IOMMU fault: " + audit, 0, audit.faults());
        assertTrue(audit.toString(), audit.violationFree());
    }

    @Test
    public void peerClientStoppedWithALiveMrWaitsAndTheTrafficEndsInErrors() throws Exception {
        Distribution.bundle(context, "org.peerdirect.mlx4-provider").start();
        waitFor("two devices", () -> mlx4().size() == 2);
        AddressSpace p = mm.createProcess("itest-peer");
        p.setMemlockLimit(1L << 30);
        PeerMemoryAllocator gpu = context.getService(context.getServiceReference(PeerMemoryAllocator.class));
        assertNotNull(gpu);
        List<String> names = mlx4();
        End a = new End(p, names.get(0));
        End b = new End(p, names.get(1));
        connect(a, b);
        connect(b, a);
        long dev = gpu.alloc(p.pid(), 1 << 16);
        IbvMr pm = b.pd.regMr(dev, 1 << 16, RW);
        assertTrue(pm.isPeer());
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong ok = new AtomicLong();
        AtomicReference<Object> end = new AtomicReference<>();
        Thread t = traffic(a, dev, pm.rkey(), stop, ok, end);
        waitFor("traffic into peer memory", () -> ok.get() > 100);

        Bundle example = Distribution.bundle(context, "org.peerdirect.example-peer-mem");
        AtomicReference<Throwable> stopFailure = new AtomicReference<>();
        Thread stopper = Thread.ofPlatform().start(() -> {
            try {
                example.stop();
            } catch (Throwable e) {
                stopFailure.set(e);
            }
        });
        waitFor("the stop to begin", () -> example.getState() == Bundle.STOPPING);
        long before = ok.get();
        waitFor("traffic continues while the MR lives", () -> ok.get() > before + 50);
        assertTrue("the stop waits for the live MR", stopper.isAlive());

        pm.dereg(); // the owner deregisters: the stop can finish
        t.join(30_000);
        assertFalse(t.isAlive());
        assertEquals("traffic with the old key ends in an access error", IbvWcStatus.REM_ACCESS_ERR, end.get());
        stopper.join(30_000);
        assertFalse("the stop returned after the deregistration", stopper.isAlive());
        assertEquals(null, stopFailure.get());
        assertEquals(Bundle.RESOLVED, example.getState());

        a.ctx.close();
        b.ctx.close();
        p.exit();
        example.start();
        IommuAudit audit = iommu.audit();
        assertEquals("no IOMMU fault: " + audit, 0, audit.faults());
        assertTrue(audit.toString(), audit.violationFree());
    }
}
