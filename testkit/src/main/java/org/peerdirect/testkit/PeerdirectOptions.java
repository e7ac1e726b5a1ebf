package org.peerdirect.testkit;

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
 * The Pax Exam options that boot peerdirect in Felix with your bundle added: every bundle of the
 * distribution (the launcher's runtime dependencies, which a build copies into one directory, e.g.
 * with {@code maven-dependency-plugin}'s {@code copy-dependencies} of
 * {@code org.peerdirect:launcher}), quiet logs, no interactive shell, sysfs under a work directory,
 * and the boot delegation JFR needs, so a test can record peerdirect's JFR events.
 *
 * <pre>{@code
 * @Configuration
 * public Option[] config() {
 *     return options(PeerdirectOptions.peerdirect(Path.of("target/bundles"), Path.of("target/itest-work")),
 *             bundle("file:target/my-client.jar"));
 * }
 * }</pre>
 */
public final class PeerdirectOptions {

    /** The JDK package JFR-instrumented event classes call into; the launcher delegates it the same way. */
    public static final String JFR_BOOT_DELEGATION = "jdk.jfr.internal.event";

    private PeerdirectOptions() {
    }

    /** The bundle jars in {@code dir}, sorted by file name. */
    public static List<Path> bundleJars(Path dir) {
        try (Stream<Path> s = Files.list(dir)) {
            List<Path> jars = s.filter(p -> p.toString().endsWith(".jar")).sorted().toList();
            if (jars.isEmpty()) {
                throw new IllegalStateException("no bundles in " + dir + ": copy the launcher's runtime dependencies there first");
            }
            return jars;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list the peerdirect bundles in " + dir, e);
        }
    }

    /** The distribution from {@code bundlesDir}, its sysfs mirror under {@code workDir/sys}. */
    public static Option peerdirect(Path bundlesDir, Path workDir) {
        return composite(
                cleanCaches(),
                systemProperty("org.ops4j.pax.url.mvn.localRepository")
                        .value(System.getProperty("org.ops4j.pax.url.mvn.localRepository", "")),
                systemProperty("org.ops4j.pax.logging.DefaultServiceLog.level").value("WARN"),
                // gogo.jline: no interactive shell in tests, and never stop the framework after the profile
                frameworkProperty("gosh.args").value("--nointeractive --noshutdown"),
                // JFR instruments the bundles' event classes (org.peerdirect.* events) so that their commit()
                // calls the JDK's jdk.jfr.internal.event.EventWriter, which no bundle imports: without this
                // delegation a commit during a recording throws ClassNotFoundException (EventWriter) out of the
                // bundle's code path (the launcher delegates it too)
                frameworkProperty("org.osgi.framework.bootdelegation").value(JFR_BOOT_DELEGATION),
                frameworkProperty("peerdirect.sysfs.root").value(workDir.resolve("sys").toAbsolutePath().toString()),
                composite(bundleJars(bundlesDir).stream().map(p -> bundle(p.toUri().toString())).toArray(Option[]::new)),
                junitBundles());
    }
}
