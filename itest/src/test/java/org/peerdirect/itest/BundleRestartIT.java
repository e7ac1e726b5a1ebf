package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import javax.inject.Inject;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.ProbeBuilder;
import org.ops4j.pax.exam.TestProbeBuilder;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Filter;
import org.osgi.framework.ServiceReference;
import org.osgi.util.tracker.ServiceTracker;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;

/**
 * Every project bundle can be stopped and started again, in turn, with full function afterwards:
 * after each restart the RDMA devices come back and validated ping-pong traffic runs on every one
 * (a restarted hca-sim used to leave no RDMA device: the driver bound while the model was still
 * registering the function and waited for its firmware on the same thread).
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class BundleRestartIT {

    private static final long WAIT_MS = 15_000;
    private static final List<String> PROJECT = List.of("hca-sim", "mlx4-provider", "ib-core", "rdma-tools", "umem-test",
            "example-peer-mem", "gpu-sim", "nvidia", "gpu-peer-mem", "ssd-sim", "nvme", "ssd-peer-mem", "mlx5-provider", "sim-kernel");

    @Inject
    BundleContext context;

    @Inject
    CommandProcessor processor;

    /** The probe runs Gogo commands. */
    @ProbeBuilder
    public TestProbeBuilder probe(TestProbeBuilder builder) {
        return Distribution.withGogo(builder);
    }

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    /** Counts tracked services and wakes waiters on every change. */
    private static final class Counting<S> extends ServiceTracker<S, S> {
        private final ReentrantLock lock = new ReentrantLock();
        private final Condition changed = lock.newCondition();

        Counting(BundleContext ctx, Filter filter) {
            super(ctx, filter, null);
        }

        @Override
        public S addingService(ServiceReference<S> ref) {
            S s = super.addingService(ref);
            signal();
            return s;
        }

        @Override
        public void removedService(ServiceReference<S> ref, S service) {
            super.removedService(ref, service);
            signal();
        }

        private void signal() {
            lock.lock();
            try {
                changed.signalAll();
            } finally {
                lock.unlock();
            }
        }

        /** Waits (bounded) until no service is tracked. */
        void awaitNone(String what) throws InterruptedException {
            long left = WAIT_MS * 1_000_000;
            lock.lock();
            try {
                while (size() > 0) {
                    assertTrue(what + ": gone within " + WAIT_MS + " ms", left > 0);
                    left = changed.awaitNanos(left);
                }
            } finally {
                lock.unlock();
            }
        }

        /** Waits (bounded) until at least {@code n} services are tracked. */
        void await(int n, String what) throws InterruptedException {
            long left = WAIT_MS * 1_000_000;
            lock.lock();
            try {
                while (size() < n) {
                    assertTrue(what + ": " + n + " service(s) within " + WAIT_MS + " ms, have " + size(), left > 0);
                    left = changed.awaitNanos(left);
                }
            } finally {
                lock.unlock();
            }
        }
    }

    private String run(String cmd) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        try (CommandSession s = processor.createSession(System.in, ps, ps)) {
            Object r = s.execute(cmd);
            return out.toString(StandardCharsets.UTF_8) + (r == null ? "" : r);
        }
    }

    /**
     * A firmware fatal error on an mlx5 device, injected from the shell ({@code hca:fw_fault}): the
     * driver's health poll finds it, mlx5_ib unregisters the device and the core disassociates
     * its users (a verb on a context they hold fails with EIO at once, closing it does not hang),
     * {@code mlx5:health} says why; a hot-plug (hca-sim restarted) brings a working device back.
     */
    @Test
    public void anMlx5FirmwareFatalErrorDisassociatesItsUsersAndAHotPlugRecovers() throws Exception {
        Counting<IbvDevice> mlx50 = new Counting<>(context, context.createFilter("(&(objectClass=" + IbvDevice.class.getName() + ")("
                + IbvDevice.NAME_PROPERTY + "=mlx5_0))"));
        mlx50.open();
        try {
            mlx50.await(1, "mlx5_0");
            ServiceReference<?>[] core = context.getAllServiceReferences("org.peerdirect.mlx5.core.Mlx5CoreDev", "(mlx5.name=mlx5_0)");
            assertTrue("mlx5_0's core device is published", core != null && core.length == 1);
            String bdf = (String) core[0].getProperty("pci.bdf");
            ServiceReference<Mm> mmRef = context.getServiceReference(Mm.class);
            AddressSpace p = context.getService(mmRef).createProcess("fatal-victim");
            IbvContext ctx = mlx50.getService().open(p);
            IbvPd pd = ctx.allocPd();
            try {
                assertEquals(bdf, run("mlx5:bdf mlx5_0"));
                assertTrue(run("hca:fw_fault " + bdf + " fatal 7"), run("hca:cx4").contains("FATAL syndrome 7"));
                String dead = run("mlx5:health -d mlx5_0 -w 15"); // returns once the poll declared it dead
                assertTrue(dead, dead.contains("DEAD (firmware fatal error, health syndrome 0x7)"));
                mlx50.awaitNone("mlx5_0 unregistered after the health poll found the fatal error");
                KernelException e = org.junit.Assert.assertThrows(KernelException.class, ctx::allocPd);
                assertEquals(KernelException.Errno.EIO, e.errno());
                pd.dealloc(); // objects of a disassociated context go quietly
                ctx.close();
            } finally {
                p.exit();
                context.ungetService(mmRef);
            }
            Bundle hca = Distribution.bundle(context, "org.peerdirect.hca-sim");
            hca.stop();
            hca.start();
            mlx50.await(1, "mlx5_0 back after the hot-plug");
            String out = run("rdma:pingpong -s 4096 -n 100 -c -d mlx5_0");
            assertTrue(out, out.contains("no mismatch"));
            String pages = run("mlx5:pages -d mlx5_0");
            assertTrue(pages, pages.contains("mlx5_0"));
        } finally {
            mlx50.close();
        }
    }

    @Test
    public void everyProjectBundleRestartsAndTrafficRunsOnEveryDevice() throws Exception {
        Counting<IbvDevice> devices = new Counting<>(context, context.createFilter("(objectClass=" + IbvDevice.class.getName() + ")"));
        Counting<Object> tools = new Counting<>(context, context.createFilter("(osgi.command.scope=rdma)"));
        devices.open();
        tools.open();
        List<String> failures = new ArrayList<>();
        try {
            for (String name : PROJECT) {
                Bundle b = Distribution.bundle(context, "org.peerdirect." + name);
                b.stop();
                assertEquals(name + " stopped", Bundle.RESOLVED, b.getState());
                b.start();
                assertEquals(name + " active again", Bundle.ACTIVE, b.getState());
                devices.await(5, "RDMA devices (2 mlx4, 3 mlx5: ConnectX-4, ConnectX-6 Dx, BlueField-3) after restarting " + name);
                tools.await(1, "rdma:* commands after restarting " + name);
                for (IbvDevice dev : devices.getServices(new IbvDevice[0])) {
                    // mlx4_N pair with each other, mlx5_0 (InfiniBand) with an mlx4, mlx5_1 and mlx5_2 (RoCE) with themselves
                    String out = run("rdma:pingpong -s 4096 -n 50 -c -d " + dev.name());
                    if (!out.contains("no mismatch")) {
                        failures.add(name + " / " + dev + ": " + out);
                    }
                }
                // the ConnectX-4+ models' engines met no exception of their own under that traffic
                String models = run("hca:cx4");
                if (!models.contains("engine failures 0") || models.matches("(?s).*engine failures [1-9].*")) {
                    failures.add(name + " / hca:cx4: " + models);
                }
            }
        } finally {
            devices.close();
            tools.close();
        }
        assertEquals("validated traffic on every device after every restart", List.of(), failures);
    }
}
