package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

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
import org.osgi.util.tracker.ServiceTracker;
import org.peerdirect.kernel.sysfs.Sysfs;

/** Stopping a bundle takes its services away; starting it brings them back, working. */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class RestartIT {

    private static final long WAIT_MS = 10_000;

    @Inject
    BundleContext context;

    @Configuration
    public Option[] config() {
        return new Option[] {Distribution.peerdirect()};
    }

    @Test
    public void simKernelServicesLeaveWithTheBundleAndComeBack() throws Exception {
        Bundle kernel = Distribution.bundle(context, "org.peerdirect.sim-kernel");
        ServiceTracker<Sysfs, Sysfs> tracker = new ServiceTracker<>(context, Sysfs.class, null);
        tracker.open();
        try {
            Sysfs before = tracker.waitForService(WAIT_MS);
            assertNotNull("sysfs service present at start", before);
            before.attribute("itest/probe", () -> "before");
            before.sync();
            Path probe = before.root().resolve("itest/probe");
            assertEquals("before\n", Files.readString(probe));

            kernel.stop();
            assertEquals(Bundle.RESOLVED, kernel.getState());
            assertNull("sysfs service gone with its bundle", tracker.getService());
            assertFalse("its mirror files are removed with it", Files.exists(probe));

            kernel.start();
            Sysfs after = tracker.waitForService(WAIT_MS);
            assertNotNull("sysfs service back after start", after);
            assertFalse("a fresh tree: nothing survived the restart", after.exists("itest/probe"));
            after.attribute("itest/probe", () -> "after");
            assertEquals("after\n", after.read("itest/probe"));
            assertTrue(after.isDirectory("itest"));
            after.remove("itest");
        } finally {
            tracker.close();
        }
    }
}
