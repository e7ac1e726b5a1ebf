package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;

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
import org.osgi.framework.BundleContext;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaObjects;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.itest.dpa.LaunchProgsStubs;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * The DOCA DPA tools in the container (issue 43 item 4): {@code dpa:sample kernel_launch} prints
 * what DOCA's sample prints (DPA_MODEL.md §4 scenario 5 as a program), and {@code dpa:doca} shows a
 * user bundle's live context through the doca-dpa bundle's {@link DocaDpaObjects} service: its
 * FlexIO process as {@code dpa:ps} lists it, its events, its launch waiting then finished, and
 * nothing once destroyed. Each ends with no DPA process and the IOMMU audit clean.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class DocaDpaToolsIT {

    @Inject
    BundleContext context;
    @Inject
    IbvDeviceList devices;
    @Inject
    Mm mm;
    @Inject
    Iommu iommu;
    @Inject
    DocaDpaObjects objects;
    @Inject
    CommandProcessor processor;

    @ProbeBuilder
    public TestProbeBuilder probe(TestProbeBuilder builder) {
        return Distribution.withGogo(builder);
    }

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    String run(String cmd) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        try (CommandSession s = processor.createSession(System.in, ps, ps)) {
            Object r = s.execute(cmd);
            return out.toString(StandardCharsets.UTF_8) + (r == null ? "" : r);
        }
    }

    /** The sample's lines without their time and pid: {@code LEVEL file:line [function] message}. */
    static List<String> docaLines(String out) {
        return out.lines().map(l -> l.replaceFirst("^\\[\\d\\d:\\d\\d:\\d\\d:\\d{6}]\\[\\d+]\\[DOCA]\\[(INF|ERR)]\\[([^\\]]+)]\\[([^\\]]+)] ", "$1 $2 [$3] "))
                .toList();
    }

    @Test
    public void theKernelLaunchSamplePrintsWhatDocasSamplePrints() throws Exception {
        String out = run("dpa:sample kernel_launch -w 200");
        assertEquals(out, List.of("INF dpa_kernel_launch_main.c:68 [main] Starting the sample", "Hello from kernel",
                "INF dpa_kernel_launch_main.c:112 [main] Sample finished successfully"), docaLines(out));
        assertEquals("no DOCA DPA context in any process", run("dpa:doca"));
        assertNoDpaProcess();
        assertAuditClean();
    }

    @Test
    public void dpaDocaShowsAUserBundlesLiveContext() throws Exception {
        AddressSpace p = mm.createProcess("itest-doca-tools");
        p.setMemlockLimit(1L << 30);
        try {
            DocaDev dev = null;
            for (DocaDevinfo i : DocaDevinfo.createList(p, devices, DocaDevinfo.pciAddrOfServices(context))) {
                if (dev == null && DocaDpa.capIsSupported(i)) {
                    dev = DocaDev.open(i);
                }
            }
            assertTrue("a device with a DPA", dev != null);
            DocaDpa dpa = DocaDpa.create(dev);
            dpa.setApp(LaunchProgsStubs.APP);
            dpa.start();
            DocaSyncEvent wait = DocaSyncEvent.create();
            wait.addPublisherLocationCpu(dev);
            wait.addSubscriberLocationDpa(dpa);
            wait.start();
            DocaSyncEvent comp = DocaSyncEvent.create();
            comp.addPublisherLocationDpa(dpa);
            comp.addSubscriberLocationCpu(dev);
            comp.start();
            long rec = dpa.memAlloc(1024);
            dpa.memset(rec, 0, 1024);
            dpa.kernelLaunchUpdateSet(wait, 4, comp, 10, 2, LaunchProgsStubs.HELLO_WORLD, rec);

            String doca = run("dpa:doca " + p.pid());
            List<DocaDpaObjects.Context> mine = objects.contexts().stream().filter(c -> c.pid() == p.pid()).toList();
            assertEquals(doca, 1, mine.size());
            int flexio = mine.get(0).flexioProcess();
            assertTrue(doca, doca.startsWith("process " + p.pid() + " (itest-doca-tools): doca_dpa on " + dev.name() + ", app itest_doca_dpa, started, FlexIO process "
                    + flexio + " (dpa:ps)"));
            assertTrue(doca, doca.contains("kernels: launched 1, started 0, finished 0, pending 1"));
            assertTrue(doca, doca.contains("doca_sync_event " + wait.id() + " started, publisher CPU, subscriber DPA"));
            String ps = run("dpa:ps");
            assertTrue(ps, ps.contains("process " + flexio + " uid "));

            wait.updateSet(5);
            comp.waitGt(9, -1L, Duration.ofSeconds(60));
            doca = run("dpa:doca " + p.pid());
            assertTrue(doca, doca.contains("kernels: launched 1, started 1, finished 1, pending 0"));
            assertTrue(doca, doca.contains("doca_sync_event " + comp.id() + " started, publisher DPA, subscriber CPU") && doca.contains("value 10"));

            wait.destroy();
            comp.destroy();
            dpa.stop();
            dpa.destroy();
            dev.close();
            assertEquals("no DOCA DPA context in process " + p.pid(), run("dpa:doca " + p.pid()));
        } finally {
            p.exit();
        }
        assertNoDpaProcess();
        assertAuditClean();
    }

    private void assertNoDpaProcess() throws Exception {
        String ps = run("dpa:ps");
        assertTrue(ps, ps.lines().noneMatch(l -> l.strip().matches("process \\d+ uid .*")));
    }

    private void assertAuditClean() {
        IommuAudit audit = iommu.audit();
        assertEquals("no IOMMU fault: " + audit, 0, audit.faults());
        assertTrue(audit.toString(), audit.violationFree());
    }
}
