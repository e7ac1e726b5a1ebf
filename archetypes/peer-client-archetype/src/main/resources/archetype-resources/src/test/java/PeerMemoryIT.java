package ${package};

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

import javax.inject.Inject;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.CoreOptions;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.ProbeBuilder;
import org.ops4j.pax.exam.TestProbeBuilder;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.BundleContext;
import org.peerdirect.kernel.sysfs.Sysfs;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;
import org.peerdirect.testkit.PeerdirectOptions;

/**
 * The bundle in peerdirect's container (Felix with every distribution bundle, under Pax Exam):
 * the IB core registers the client through the whiteboard (its statistics appear in the sysfs
 * tree), and the test DMA device registers its memory through the peer path, DMAs, and
 * deregisters, the client's counters following.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class PeerMemoryIT {

    private static final String STATS = "kernel/infiniband/memory_peers/" + PeerMemoryComponent.NAME;

    @Inject
    BundleContext context;
    @Inject
    CommandProcessor processor;
    @Inject
    Sysfs sysfs;

    /** The probe runs Gogo commands, whose API Gogo exports as provisional. */
    @ProbeBuilder
    public TestProbeBuilder probe(TestProbeBuilder builder) {
        builder.setHeader(org.osgi.framework.Constants.DYNAMICIMPORT_PACKAGE, "org.apache.felix.service.command;status=provisional,*");
        return builder;
    }

    @Configuration
    public Option[] config() {
        return new Option[] {
            PeerdirectOptions.peerdirect(Path.of(System.getProperty("peerdirect.bundles")), Path.of(System.getProperty("peerdirect.itest.work"))),
            CoreOptions.bundle(Path.of(System.getProperty("client.bundle")).toUri().toString())
        };
    }

    @Test
    public void theCoreRegistersTheClientAndADeviceRegistersItsMemory() throws Exception {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!sysfs.exists(STATS)) {
            assertTrue("the IB core registered " + PeerMemoryComponent.NAME + " within 30 s", System.nanoTime() < deadline);
            Thread.onSpinWait();
        }
        PeerMemoryAllocator memory = context.getServiceReferences(PeerMemoryAllocator.class, null).stream().map(context::getService)
                .filter(a -> a.name().equals(PeerMemoryComponent.NAME)).findFirst().orElseThrow();
        PrintStream out = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);
        CommandSession s = processor.createSession(System.in, out, out);
        int pid = ((Number) s.execute("kernel:spawn it-app")).intValue();
        long buf = memory.alloc(pid, 1 << 20);
        int mr = ((Number) s.execute("umemtest:reg " + pid + " " + buf + " 65536")).intValue();
        assertTrue(String.valueOf(s.execute("umemtest:dma " + mr)).startsWith("DMA ok"));
        s.execute("umemtest:dereg " + mr);
        assertEquals("1", sysfs.read(STATS + "/num_alloc_mrs").trim());
        assertEquals("1", sysfs.read(STATS + "/num_dealloc_mrs").trim());
        s.execute("kernel:kill " + pid);
        s.close();
    }
}
