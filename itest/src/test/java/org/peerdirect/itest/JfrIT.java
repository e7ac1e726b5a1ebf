package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import javax.inject.Inject;

import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.BundleContext;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.testkit.PeerdirectOptions;

import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * A Pax Exam container booted with the testkit's options records peerdirect's JFR events: a
 * recording started inside the framework holds the mlx5 firmware commands a PD's allocation sends
 * ({@code ALLOC_PD}), with their fields. Without the testkit's boot delegation of
 * {@code jdk.jfr.internal.event} the instrumented {@code commit()} of a bundle's event class fails
 * ({@code ClassNotFoundException: jdk.jfr.internal.event.EventWriter not found by org.peerdirect.mlx5-provider}:
 * the allocation itself fails), as this test showed with the delegation taken out.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class JfrIT {

    @Inject
    BundleContext context;
    @Inject
    IbvDeviceList devices;
    @Inject
    Mm mm;

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    private IbvDevice mlx5() throws InterruptedException {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (System.nanoTime() < deadline) {
            for (IbvDevice d : devices.devices()) {
                if (d.name().equals("mlx5_0") && !d.removed()) {
                    return d;
                }
            }
            Thread.sleep(50); // polling for a driver's probe in another bundle, not synchronising threads
        }
        throw new AssertionError("no mlx5_0 within 20 s: " + devices.devices());
    }

    @Test
    public void aRecordingInsideTheContainerHoldsTheFirmwareCommandsOfAPdAllocation() throws Exception {
        assertEquals(PeerdirectOptions.JFR_BOOT_DELEGATION, context.getProperty("org.osgi.framework.bootdelegation"));
        IbvDevice dev = mlx5();
        AddressSpace p = mm.createProcess("itest-jfr");
        Path file = Files.createTempFile("itest-jfr", ".jfr");
        try (Recording r = new Recording()) {
            r.enable("org.peerdirect.Mlx5Command");
            r.start();
            IbvContext c = dev.open(p);
            c.allocPd().dealloc();
            c.close();
            r.stop();
            r.dump(file);
        } finally {
            p.exit();
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getEventType().getName().equals("org.peerdirect.Mlx5Command")).toList();
        Files.delete(file);
        assertTrue("the PD's firmware commands were recorded: " + events,
                events.stream().anyMatch(e -> e.getString("device").equals("mlx5_0") && e.getString("opcode").equals("ALLOC_PD")));
        assertTrue("and its deallocation: " + events, events.stream().anyMatch(e -> e.getString("opcode").equals("DEALLOC_PD")));
    }
}
