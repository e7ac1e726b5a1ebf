package org.peerdirect.itest;


import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import org.ops4j.pax.exam.Option;
import org.peerdirect.testkit.PeerdirectOptions;

/**
 * Where this build put the distribution's bundles ({@code target/bundles}, the launcher's runtime
 * dependencies), and the testkit's Pax Exam options over them.
 */
final class Distribution {

    private Distribution() {
    }

    static Path bundlesDir() {
        String dir = System.getProperty("peerdirect.bundles");
        if (dir == null) {
            throw new IllegalStateException("system property peerdirect.bundles is not set: run the tests through Maven (mvn verify)");
        }
        return Path.of(dir);
    }

    /**
     * The distribution's jars. Also called inside the framework (by the probe), where the testkit is
     * not installed, so it lists the directory itself rather than calling the testkit.
     */
    static List<Path> jars() {
        try (Stream<Path> s = Files.list(bundlesDir())) {
            return s.filter(p -> p.toString().endsWith(".jar")).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Option peerdirect() {
        return PeerdirectOptions.peerdirect(bundlesDir(), Path.of(System.getProperty("peerdirect.itest.work", "target/itest-work")));
    }

    /** Gogo exports its command API as provisional (a mandatory attribute): a probe that runs commands must ask for it. */
    static org.ops4j.pax.exam.TestProbeBuilder withGogo(org.ops4j.pax.exam.TestProbeBuilder builder) {
        builder.setHeader(org.osgi.framework.Constants.DYNAMICIMPORT_PACKAGE, "org.apache.felix.service.command;status=provisional,*");
        return builder;
    }

    /** The installed bundle with symbolic name {@code bsn}; fails naming it when it is not installed. */
    static org.osgi.framework.Bundle bundle(org.osgi.framework.BundleContext context, String bsn) {
        return java.util.Arrays.stream(context.getBundles()).filter(b -> bsn.equals(b.getSymbolicName())).findFirst()
                .orElseThrow(() -> new AssertionError("bundle " + bsn + " is not installed"));
    }
}
