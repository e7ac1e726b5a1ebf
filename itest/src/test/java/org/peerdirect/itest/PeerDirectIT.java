package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicReference;

import javax.inject.Inject;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.TestProbeBuilder;
import org.ops4j.pax.exam.ProbeBuilder;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.util.tracker.ServiceTracker;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.sysfs.Sysfs;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistry;

/**
 * Peer-Direct inside Felix: the example client installed and started at run time, a
 * registration through it, an invalidation, a stop with a live registration (which waits until
 * another thread deregisters it), a restart and a new registration. Ends with the IOMMU audit.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class PeerDirectIT {

    private static final long WAIT_MS = 20_000;
    private static final String STATS = "kernel/infiniband/memory_peers/example_peer";

    @Inject
    BundleContext context;
    @Inject
    CommandProcessor processor;
    @Inject
    Iommu iommu;
    @Inject
    Sysfs sysfs;
    @Inject
    PeerMemoryRegistry registry;

    /** The probe runs Gogo commands. */
    @ProbeBuilder
    public TestProbeBuilder probe(TestProbeBuilder builder) {
        return Distribution.withGogo(builder);
    }

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    /** A Gogo session whose output the test keeps to itself (commands' results are what it reads). */
    private CommandSession session() {
        PrintStream ps = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);
        return processor.createSession(System.in, ps, ps);
    }

    private Object run(CommandSession s, String cmd) throws Exception {
        return s.execute(cmd);
    }

    private void waitFor(String what, java.util.function.BooleanSupplier cond) {
        long deadline = System.nanoTime() + WAIT_MS * 1_000_000;
        while (!cond.getAsBoolean()) {
            assertTrue("timed out waiting for " + what, System.nanoTime() < deadline);
            Thread.onSpinWait();
        }
    }

    @Test
    public void exampleClientLifecycleInsideFelix() throws Exception {
        CommandSession s = session();
        ServiceTracker<PeerMemoryClient, PeerMemoryClient> clients = new ServiceTracker<>(context, PeerMemoryClient.class, null);
        clients.open();
        try {
            // install and start the client at run time
            Bundle shipped = Distribution.bundle(context, "org.peerdirect.example-peer-mem");
            assertNotNull(shipped);
            String location = Distribution.jars().stream().filter(p -> p.getFileName().toString().startsWith("example-peer-mem"))
                    .findFirst().orElseThrow().toUri().toString();
            shipped.uninstall();
            waitFor("no client statistics", () -> !sysfs.exists(STATS));
            Bundle example = context.installBundle(location);
            example.start();
            waitFor("the client registered through the whiteboard", () -> sysfs.exists(STATS));
            assertTrue(String.valueOf(run(s, "peermem:clients")).contains("example_peer"));

            // register, DMA, invalidate
            int pid = ((Number) run(s, "kernel:spawn itest-app")).intValue();
            String buf = (String) run(s, "example_peer:alloc " + pid + " 1048576");
            int mr = registerAndDma(s, pid, buf);
            sysfs.sync();
            assertEquals("1\n", Files.readString(sysfs.root().resolve(STATS + "/num_alloc_mrs")));
            assertEquals("invalidated 1 registration(s) of " + buf, run(s, "example_peer:invalidate " + pid + " " + buf));
            assertTrue(String.valueOf(run(s, "umemtest:dma " + mr)).contains("revoked"));
            assertEquals("1\n", sysfs.read(STATS + "/num_free_callbacks"));
            javax.management.ObjectName on = new javax.management.ObjectName(
                    "org.peerdirect:type=PeerMemoryClient,name=" + javax.management.ObjectName.quote("example_peer"));
            javax.management.MBeanServer jmx = java.lang.management.ManagementFactory.getPlatformMBeanServer();
            assertEquals("the JMX view agrees with sysfs", 1L, jmx.getAttribute(on, "NumFreeCallbacks"));
            assertEquals(1L, jmx.getAttribute(on, "NumAllocMrs"));
            run(s, "umemtest:dereg " + mr);

            // stop with a live registration: the stop waits until another thread deregisters it
            int live = ((Number) run(s, "umemtest:reg " + pid + " " + buf + " 8192")).intValue();
            AtomicReference<Throwable> stopFailure = new AtomicReference<>();
            Thread stopper = Thread.ofPlatform().start(() -> {
                try {
                    example.stop();
                } catch (Throwable t) {
                    stopFailure.set(t);
                }
            });
            // other clients (the GPU's nv_mem) stay registered: look at the example client's line
            waitFor("the client leaves brokering", () -> String.valueOf(runQuietly(s, "peermem:clients")).lines()
                    .noneMatch(l -> l.contains("example_peer") && l.contains("registered ")));
            assertTrue("stop blocks while the MR is live", stopper.isAlive());
            assertEquals(Bundle.STOPPING, example.getState());
            run(s, "umemtest:dereg " + live);
            stopper.join(WAIT_MS);
            assertFalse("stop returned once the MR was deregistered", stopper.isAlive());
            assertEquals(null, stopFailure.get());
            assertEquals(Bundle.RESOLVED, example.getState());
            assertFalse("statistics gone with the client", sysfs.exists(STATS));
            assertFalse("the MBean too", java.lang.management.ManagementFactory.getPlatformMBeanServer().isRegistered(
                    new javax.management.ObjectName("org.peerdirect:type=PeerMemoryClient,name=" + javax.management.ObjectName.quote("example_peer"))));

            // restart and register again
            example.start();
            waitFor("the client registered again", () -> sysfs.exists(STATS));
            String buf2 = (String) run(s, "example_peer:alloc " + pid + " 65536");
            int mr2 = registerAndDma(s, pid, buf2);
            assertEquals("a fresh client, fresh counters", "0\n", sysfs.read(STATS + "/num_free_callbacks"));
            run(s, "umemtest:dereg " + mr2);
            run(s, "example_peer:free " + pid + " " + buf2);
            run(s, "kernel:kill " + pid);

            assertNoFaultAndClean();
        } finally {
            clients.close();
            s.close();
        }
    }

    /**
     * nvidia-peermem's module reference: an MR over GPU memory holds it, {@code kernel:rmmod}
     * refuses with EBUSY naming the module and changes nothing (the MR still moves bytes); after
     * the deregistration the module unloads (its bundle stops) and {@code kernel:modprobe} loads it
     * again.
     */
    @Test
    public void rmmodRefusesNvidiaPeermemWhileAnMrUsesItAndUnloadsAfter() throws Exception {
        CommandSession s = session();
        Bundle gpu = Distribution.bundle(context, "org.peerdirect.gpu-peer-mem");
        try {
            waitFor("nvidia_peermem loaded", () -> String.valueOf(runQuietly(s, "kernel:lsmod")).contains("nvidia_peermem"));
            int pid = ((Number) run(s, "kernel:spawn itest-gpu")).intValue();
            String buf = (String) run(s, "gpu:alloc " + pid + " 128K");
            int mr = registerAndDma(s, pid, buf);
            String ls = String.valueOf(run(s, "kernel:lsmod"));
            assertTrue("one reference while the MR lives:\n" + ls, ls.lines().anyMatch(l -> l.matches("nvidia_peermem\\s+1\\s+LIVE.*")));

            Exception busy = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "kernel:rmmod nvidia_peermem"));
            assertTrue(busy.getMessage(), busy.getMessage().contains("EBUSY") && busy.getMessage().contains("Module nvidia_peermem is in use"));
            assertEquals("the refused rmmod left the bundle alone", Bundle.ACTIVE, gpu.getState());
            assertTrue("and the MR working", String.valueOf(run(s, "umemtest:dma " + mr)).startsWith("DMA ok"));

            run(s, "umemtest:dereg " + mr);
            run(s, "gpu:memcpy htod " + pid + " " + buf + " 7 4096");
            assertTrue(String.valueOf(run(s, "kernel:rmmod nvidia_peermem")).contains("unloaded"));
            assertEquals(Bundle.RESOLVED, gpu.getState());
            assertFalse(String.valueOf(run(s, "kernel:lsmod")).contains("nvidia_peermem"));
            Exception gone = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "kernel:rmmod nvidia_peermem"));
            assertTrue(gone.getMessage(), gone.getMessage().contains("ENOENT") && gone.getMessage().contains("not currently loaded"));
            // nvidia.ko and the GPU stay (their own bundles): the allocation and its bytes are still there,
            // but with no peer client to claim GPU memory a registration over it fails as ibv_reg_mr does
            String smi = String.valueOf(run(s, "gpu:smi"));
            assertTrue("the GPU and its allocation outlive nvidia_peermem:\n" + smi, smi.contains("GPU 0:") && smi.contains("Allocations         : 1,"));
            assertTrue(String.valueOf(run(s, "gpu:memcpy dtoh " + pid + " " + buf + " 4")).startsWith("07 07 07 07"));
            Exception unclaimed = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "umemtest:reg " + pid + " " + buf + " 65536"));
            assertTrue(unclaimed.getMessage(), unclaimed.getMessage().contains("EFAULT"));

            assertTrue(String.valueOf(run(s, "kernel:modprobe nvidia_peermem")).contains("loaded"));
            assertEquals(Bundle.ACTIVE, gpu.getState());
            ls = String.valueOf(run(s, "kernel:lsmod"));
            assertTrue("loaded again, unused:\n" + ls, ls.lines().anyMatch(l -> l.matches("nvidia_peermem\\s+0\\s+LIVE.*")));
            int again = registerAndDma(s, pid, buf); // the same allocation registers again
            run(s, "umemtest:dereg " + again);
            run(s, "gpu:free " + pid + " " + buf);
            run(s, "kernel:kill " + pid);
            assertNoFaultAndClean();
        } finally {
            if (gpu.getState() != Bundle.ACTIVE) {
                gpu.start();
            }
            s.close();
        }
    }

    /**
     * The SSD in three bundles by kernel file: {@code kernel:rmmod ssd_peer_mem} stops only the
     * peer client; the controller ({@code nvme}) and the model ({@code ssd-sim}) stay, so the PMR
     * still takes MMIO writes that the model holds posted, and the tools find no {@code ssd_mem}
     * until {@code kernel:modprobe} loads it again.
     */
    @Test
    public void rmmodSsdPeerMemLeavesTheControllerAndTheModel() throws Exception {
        CommandSession s = session();
        Bundle client = Distribution.bundle(context, "org.peerdirect.ssd-peer-mem");
        try {
            waitFor("ssd_peer_mem loaded", () -> String.valueOf(runQuietly(s, "kernel:lsmod")).contains("ssd_peer_mem"));
            assertTrue(String.valueOf(run(s, "kernel:rmmod ssd_peer_mem")).contains("unloaded"));
            assertEquals(Bundle.RESOLVED, client.getState());
            assertTrue(String.valueOf(run(s, "ssd:info")).contains("nvme0 "));
            run(s, "ssd:write 61440 rmmod-survivor");
            assertEquals("nvme0 PMR 0xf000+14: rmmod-survivor\n", run(s, "ssd:read 61440 14"));
            String media = String.valueOf(run(s, "ssd:media"));
            assertFalse("the MMIO write is posted in the model:\n" + media, media.contains("posted         0 page(s)"));
            Exception none = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "rdma:put -d mlx5_0 --mem ssd_mem --offset 0 --text x"));
            assertTrue(none.getMessage(), none.getMessage().contains("no peer memory client of that name"));

            assertTrue(String.valueOf(run(s, "kernel:modprobe ssd_peer_mem")).contains("loaded"));
            assertEquals(Bundle.ACTIVE, client.getState());
            assertTrue(String.valueOf(run(s, "rdma:put -d mlx5_0 --mem ssd_mem --offset 65536 --text back")).contains("SUCCESS"));
            run(s, "ssd:flush");
            assertTrue(String.valueOf(run(s, "ssd:media")).contains("posted         0 page(s)"));
            assertNoFaultAndClean();
        } finally {
            if (client.getState() != Bundle.ACTIVE) {
                client.start();
            }
            s.close();
        }
    }

    /**
     * {@code hca:link} is the lab's cable for the ConnectX-3 too (it was the ConnectX-4+'s only):
     * pulling the first ConnectX-3's link makes {@code mlx4_0} report IBV_EVENT_PORT_ERR and its
     * port PORT_DOWN, plugging it back PORT_ACTIVE, and traffic runs again; a bus address with no
     * HCA model behind it is refused, naming the ones there are.
     */
    @Test
    public void hcaLinkPullsAConnectX3CableToo() throws Exception {
        CommandSession s = session();
        String bdf = String.valueOf(run(s, "kernel:lspci")).lines().filter(l -> l.contains("[ConnectX-3]")).findFirst()
                .orElseThrow().split(" ")[0];
        try {
            run(s, "hca:link " + bdf + " down --after 200");
            String down = String.valueOf(run(s, "rdma:asyncwatch -d mlx4_0 -t 10000 -n 1"));
            assertTrue(down, down.contains("IBV_EVENT_PORT_ERR"));
            assertTrue(String.valueOf(run(s, "rdma:devinfo -d mlx4_0")).contains("PORT_DOWN"));
            run(s, "hca:link " + bdf + " up --after 200");
            String up = String.valueOf(run(s, "rdma:asyncwatch -d mlx4_0 -t 10000 -n 1"));
            assertTrue(up, up.contains("IBV_EVENT_PORT_ACTIVE"));
            assertTrue(String.valueOf(run(s, "rdma:pingpong -d mlx4_0 -n 20 -c")).contains("validated 20 received buffers"));
            Exception none = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "hca:link 0000:7f:00.0 down"));
            assertTrue(none.getMessage(), none.getMessage().contains("no HCA model at '0000:7f:00.0'") && none.getMessage().contains(bdf));
            assertNoFaultAndClean();
        } finally {
            runQuietly(s, "hca:link " + bdf + " up"); // a failed assertion leaves no cable pulled for the next test
            s.close();
        }
    }

    /**
     * Two GPUs: {@code gpu:alloc ... 1} (cudaSetDevice(1)) allocates on the second; free and copies
     * find the GPU from the address; {@code --mem nv_mem:1} runs a validated pingpong over GPU 1's
     * memory (its pins counted on GPU 1, none on GPU 0); a GPU index beyond the last is ENODEV.
     */
    @Test
    public void aSecondGpuIsChosenByIndexAndFoundByAddress() throws Exception {
        withTwoDevices("org.peerdirect.gpu gpus", "gpu:smi", "GPU 0:", "GPU 1:", s -> {
            int pid = ((Number) run(s, "kernel:spawn itest-gpus")).intValue();
            String d = (String) run(s, "gpu:alloc " + pid + " 1M 1");
            run(s, "gpu:memcpy htod " + pid + " " + d + " 9 4096");
            assertTrue(String.valueOf(run(s, "gpu:memcpy dtoh " + pid + " " + d + " 8")).startsWith("09 09 09 09 09 09 09 09"));
            assertOnSecondOnly(String.valueOf(run(s, "gpu:smi")), "GPU 1:", "Allocations         : 0,", "the allocation");
            run(s, "gpu:free " + pid + " " + d);
            Exception e = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "gpu:alloc " + pid + " 1M 2"));
            assertTrue(e.getMessage(), e.getMessage().contains("ENODEV") && e.getMessage().contains("GPU 2"));
            String pp = String.valueOf(run(s, "rdma:pingpong -d mlx5_0 -s 65536 -n 20 -c --mem nv_mem:1"));
            assertTrue(pp, pp.contains("validated 20 received buffers"));
            assertOnSecondOnly(String.valueOf(run(s, "gpu:smi")), "GPU 1:", "P2P pins            : 0,", "the pingpong's pins");
            run(s, "kernel:kill " + pid);
        });
    }

    /**
     * Two SSDs: {@code --mem ssd_mem:1} runs a validated pingpong over nvme1's persistent memory
     * region (its pins counted on nvme1, none on nvme0; the model of SSD 1 alone holds posted
     * writes, until {@code ssd:flush 1}); the tools refuse an SSD index beyond the last, naming the
     * SSDs there are.
     */
    @Test
    public void aSecondSsdIsChosenByIndex() throws Exception {
        withTwoDevices("org.peerdirect.ssd ssds", "ssd:info", "nvme0 ", "nvme1 ", s -> {
            String pp = String.valueOf(run(s, "rdma:pingpong -d mlx5_0 -s 65536 -n 20 -c --mem ssd_mem:1"));
            assertTrue(pp, pp.contains("validated 20 received buffers"));
            assertOnSecondOnly(String.valueOf(run(s, "ssd:info")), "nvme1 ", "counters       pins 0,", "the pingpong's pins");
            assertOnSecondOnly(String.valueOf(run(s, "ssd:media")), "SSD 1 ", "posted         0 page(s)", "the pingpong's posted writes");
            assertTrue(String.valueOf(run(s, "ssd:flush 1")).startsWith("nvme1: PMR write barrier complete"));
            String media = String.valueOf(run(s, "ssd:media"));
            assertEquals("after nvme1's barrier nothing is posted on either model:\n" + media, 2, media.split("posted         0 page\\(s\\)", -1).length - 1);
            Exception e = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "rdma:pingpong -d mlx5_0 -s 4096 -n 2 --mem ssd_mem:2"));
            assertTrue(e.getMessage(), e.getMessage().contains("ssd_mem has 2 device(s), 0..1"));
        });
    }

    private interface SessionBody {
        void run(CommandSession s) throws Exception;
    }

    /**
     * Configures two devices ({@code config} is "pid property", set to 2) and waits until
     * {@code view} lists {@code second}; runs {@code body}; then goes back to one device (only
     * {@code first} listed) whatever happened, and checks the IOMMU audit.
     */
    private void withTwoDevices(String config, String view, String first, String second, SessionBody body) throws Exception {
        CommandSession s = session();
        try {
            run(s, "peerdirect:config " + config + " 2");
            waitFor("two devices in " + view, () -> String.valueOf(runQuietly(s, view)).contains(second));
            body.run(s);
        } finally {
            runQuietly(s, "peerdirect:config " + config + " 1");
            waitFor("one device again in " + view, () -> !String.valueOf(runQuietly(s, view)).contains(second)
                    && String.valueOf(runQuietly(s, view)).contains(first));
            s.close();
        }
        IommuAudit a = iommu.audit();
        assertTrue("IOMMU audit clean: " + a, a.violationFree());
    }

    /** In a two-device listing, the first device's part shows {@code none} and the second's ({@code second} on) does not: {@code what} went to the second only. */
    private static void assertOnSecondOnly(String listing, String second, String none, String what) {
        int at = listing.indexOf(second);
        assertTrue(second + " listed:\n" + listing, at > 0);
        assertTrue(what + " is not on the first device:\n" + listing, listing.substring(0, at).contains(none));
        assertFalse(what + " is on the second:\n" + listing, listing.substring(at).contains(none));
    }

    /** The example client's line of {@code peermem:clients} (empty while it is not known to the core). */
    private String exampleLine(CommandSession s) {
        return String.valueOf(runQuietly(s, "peermem:clients")).lines().filter(l -> l.contains("example_peer")).findFirst().orElse("");
    }

    /**
     * Issue 45 item 4: {@code example_peer_mem}'s {@code peermem.invalidation} changed in place (its
     * {@code @Modified} keeps the component, DS changes its service property) is followed by the
     * core's whiteboard: the client leaves brokering, the change waits for the live MR as rmmod
     * would, and the client comes back with the new flavour, so freeing its memory is refused
     * (EBUSY) instead of invalidating MRs; and back again.
     */
    @Test
    public void aPeerClientsFlavourChangedInPlaceIsFollowedByTheCore() throws Exception {
        String pidCfg = "org.peerdirect.example_peer_mem";
        CommandSession s = session();
        CommandSession cfg = session();
        try {
            waitFor("example_peer brokered with invalidation", () -> exampleLine(s).matches("\\d+\\s+example_peer\\s.*registered\\s+invalidation\\s+0"));
            int pid = ((Number) run(s, "kernel:spawn flavour-app")).intValue();
            String buf = (String) run(s, "example_peer:alloc " + pid + " 1048576");
            int mr = registerAndDma(s, pid, buf);
            AtomicReference<Object> answer = new AtomicReference<>();
            Thread change = Thread.ofPlatform().start(() -> answer.set(runQuietly(cfg, "peerdirect:config " + pidCfg + " peermem.invalidation false")));
            waitFor("the client leaves brokering and waits for its MR", () -> exampleLine(s).matches("-\\s+example_peer\\s.*unregistering\\s+invalidation\\s+1"));
            run(s, "umemtest:dereg " + mr);
            waitFor("registered again without invalidation", () -> exampleLine(s).matches("\\d+\\s+example_peer\\s.*registered\\s+no invalidation\\s+0"));
            change.join(WAIT_MS);
            assertFalse(change.isAlive());
            assertTrue(String.valueOf(answer.get()), String.valueOf(answer.get()).contains("peermem.invalidation = false"));

            int kept = registerAndDma(s, pid, buf);
            Exception busy = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "example_peer:free " + pid + " " + buf));
            assertTrue(busy.getMessage(), busy.getMessage().contains("EBUSY") && busy.getMessage().contains("cannot invalidate"));
            assertTrue("the MR still works", String.valueOf(run(s, "umemtest:dma " + kept)).startsWith("DMA ok"));
            run(s, "umemtest:dereg " + kept);

            run(s, "peerdirect:config " + pidCfg + " peermem.invalidation true"); // no MR: at once
            waitFor("registered again with invalidation", () -> exampleLine(s).matches("\\d+\\s+example_peer\\s.*registered\\s+invalidation\\s+0"));
            int inv = registerAndDma(s, pid, buf);
            assertEquals("invalidated 1 registration(s) of " + buf, run(s, "example_peer:invalidate " + pid + " " + buf));
            assertTrue(String.valueOf(run(s, "umemtest:dma " + inv)).contains("revoked"));
            run(s, "umemtest:dereg " + inv);
            run(s, "example_peer:free " + pid + " " + buf);
            run(s, "kernel:kill " + pid);
            assertNoFaultAndClean();
        } finally {
            cfg.close();
            s.close();
        }
    }

    /**
     * Issue 45 items 5 and 8 in the shell: on the one InfiniBand device with ODP and dma-buf MRs
     * ({@code mlx5_0}; {@code mlx4_*} have neither, {@code mlx5_1} is Ethernet) {@code rdma:pingpong
     * -o} (and {@code -O}, {@code --dmabuf}) runs both ends on it, through its port, as
     * {@code ibv_rc_pingpong -d mlx5_0} on a one-NIC host; {@code --server-dev} picks the server's
     * device (mlx4_0 then refuses ODP by name; the Ethernet device has no path); a latency test
     * refuses {@code -t}, naming it.
     */
    @Test
    public void toolsLoopBackOnTheOneDeviceThatCanServeAndRefuseWhatTheyIgnore() throws Exception {
        CommandSession s = session();
        try {
            waitFor("mlx5_0, mlx5_1 and mlx4_0", () -> String.valueOf(runQuietly(s, "rdma:devices")).contains("mlx5_0")
                    && String.valueOf(runQuietly(s, "rdma:devices")).contains("mlx5_1") && String.valueOf(runQuietly(s, "rdma:devices")).contains("mlx4_0"));
            String pp = String.valueOf(run(s, "rdma:pingpong -d mlx5_0 -o -c -n 50"));
            assertTrue(pp, pp.contains("validated 50 received buffers"));
            String implicit = String.valueOf(run(s, "rdma:pingpong -d mlx5_0 -O -c -n 20"));
            assertTrue(implicit, implicit.contains("validated 20 received buffers"));
            String db = String.valueOf(run(s, "rdma:pingpong -d mlx5_0 -c -n 20 --mem nv_mem --dmabuf")); // mlx4 has no dma-buf MRs
            assertTrue(db, db.contains("validated 20 received buffers") && db.contains("registered as dma-buf MRs"));
            String bw = String.valueOf(run(s, "rdma:write_bw -d mlx5_0 --odp -n 200"));
            assertTrue(bw, bw.contains("Device         : mlx5_0") && bw.contains("registered on demand (ODP)"));
            Exception noOdp = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "rdma:pingpong -d mlx5_0 -o -n 5 --server-dev mlx4_0"));
            assertTrue(noOdp.getMessage(), noOdp.getMessage().contains("mlx4_0 has no on-demand paging"));
            Exception noPath = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "rdma:pingpong -d mlx5_0 -n 5 --server-dev mlx5_1"));
            assertTrue(noPath.getMessage(), noPath.getMessage().contains("--server-dev mlx5_1 is on Ethernet and mlx5_0 on InfiniBand: no path between them"));
            String explicit = String.valueOf(run(s, "rdma:pingpong -d mlx5_0 -c -n 20 --server-dev mlx4_0"));
            assertTrue(explicit, explicit.contains("validated 20 received buffers"));
            Exception t = org.junit.Assert.assertThrows(Exception.class, () -> run(s, "rdma:write_lat -t 5"));
            assertTrue(t.getMessage(), t.getMessage().contains("rdma:write_lat: option -t (TX depth) is not supported"));
            assertNoFaultAndClean();
        } finally {
            s.close();
        }
    }

    /** {@code umemtest:reg} of 64 KiB at {@code buf}, then a DMA through it that must succeed; the MR. */
    private int registerAndDma(CommandSession s, int pid, String buf) throws Exception {
        int mr = ((Number) run(s, "umemtest:reg " + pid + " " + buf + " 65536")).intValue();
        assertTrue(String.valueOf(run(s, "umemtest:dma " + mr)).startsWith("DMA ok"));
        return mr;
    }

    /** The IOMMU audit: no refused DMA at all, and no violation. */
    private void assertNoFaultAndClean() {
        IommuAudit a = iommu.audit();
        assertEquals("no IOMMU fault: " + a, 0, a.faults());
        assertTrue("IOMMU audit clean: " + a, a.violationFree());
    }

    private Object runQuietly(CommandSession s, String cmd) {
        try {
            return s.execute(cmd);
        } catch (Exception e) {
            return e.toString();
        }
    }
}
