package ${package};

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;

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
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.testkit.PeerdirectOptions;

/**
 * The bundle in peerdirect's container (Felix with every distribution bundle but mlx4-provider,
 * under Pax Exam): it binds the ConnectX-3 models' PCI functions, registers their devices with the
 * IB core, and a validated ping-pong runs over them.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class ProviderIT {

    @Inject
    BundleContext context;
    @Inject
    CommandProcessor processor;
    @Inject
    IbvDeviceList devices;

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
            CoreOptions.bundle(Path.of(System.getProperty("provider.bundle")).toUri().toString())
        };
    }

    @Test
    public void theBundleDrivesTheConnectX3ModelsAndTrafficRuns() throws Exception {
        assertTrue("mlx4-provider is not in this container",
                Arrays.stream(context.getBundles()).noneMatch(b -> "org.peerdirect.mlx4-provider".equals(b.getSymbolicName())));
        Bundle mine = Arrays.stream(context.getBundles()).filter(b -> b.getLocation().endsWith(".jar") && b.getLocation().contains("${artifactId}"))
                .findFirst().orElseThrow();
        assertEquals(Bundle.ACTIVE, mine.getState());
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (devices.devices().stream().noneMatch(d -> d.name().equals("mlx4_0"))) {
            assertTrue("mlx4_0 registered within 30 s: " + devices.devices(), System.nanoTime() < deadline);
            Thread.onSpinWait();
        }
        PrintStream out = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);
        CommandSession s = processor.createSession(System.in, out, out);
        String pp = String.valueOf(s.execute("rdma:pingpong -d mlx4_0 -s 4096 -n 100 -c"));
        assertTrue(pp, pp.contains("no mismatch"));
        s.close();
    }
}
