package org.peerdirect.itest;

import static org.ops4j.pax.exam.CoreOptions.bundle;
import static org.ops4j.pax.exam.CoreOptions.cleanCaches;
import static org.ops4j.pax.exam.CoreOptions.composite;
import static org.ops4j.pax.exam.CoreOptions.frameworkProperty;
import static org.ops4j.pax.exam.CoreOptions.junitBundles;
import static org.ops4j.pax.exam.CoreOptions.systemProperty;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import org.ops4j.pax.exam.Option;

/**
 * The Pax Exam options that boot peerdirect: every bundle of the distribution (the launcher's
 * runtime dependencies, copied by the build to {@code target/bundles}), in the launcher's order.
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

    static List<Path> jars() {
        try (Stream<Path> s = Files.list(bundlesDir())) {
            List<Path> jars = s.filter(p -> p.toString().endsWith(".jar")).sorted().toList();
            if (jars.isEmpty()) {
                throw new IllegalStateException("no bundles in " + bundlesDir());
            }
            return jars;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Option peerdirect() {
        Path work = Path.of(System.getProperty("peerdirect.itest.work", "target/itest-work"));
        return composite(
                cleanCaches(),
                systemProperty("org.ops4j.pax.url.mvn.localRepository")
                        .value(System.getProperty("org.ops4j.pax.url.mvn.localRepository", "")),
                systemProperty("org.ops4j.pax.logging.DefaultServiceLog.level").value("WARN"),
                // gogo.jline: no interactive shell in tests, and never stop the framework after the profile
                frameworkProperty("gosh.args").value("--nointeractive --noshutdown"),
                frameworkProperty("peerdirect.sysfs.root").value(work.resolve("sys").toAbsolutePath().toString()),
                composite(jars().stream().map(p -> bundle(p.toUri().toString())).toArray(Option[]::new)),
                junitBundles());
    }
}
