package org.peerdirect.itest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The launcher as a user runs it: a separate JVM on the built distribution
 * ({@code launcher/target/peerdirect}), the way {@code ./peerdirect} starts it.
 */
class LauncherIT {

    private static final Path DIST = Path.of(System.getProperty("peerdirect.dist", "../launcher/target/peerdirect"));
    private static final Path CLASSES = Path.of(System.getProperty("peerdirect.launcher.classes", "../launcher/target/classes"));

    @TempDir
    Path tmp;

    record Run(int exit, String out, String err) {
    }

    private Run launch(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
                "-Dpeerdirect.home=" + DIST.toAbsolutePath(),
                "-cp", CLASSES.toAbsolutePath() + java.io.File.pathSeparator + DIST.resolve("lib").toAbsolutePath() + "/*",
                "org.peerdirect.launcher.Main", "--home", tmp.resolve("home").toString(),
                "--bundles", DIST.resolve("bundle").toAbsolutePath().toString()));
        cmd.addAll(List.of(args));
        Files.createDirectories(tmp.resolve("home/etc"));
        Files.copy(DIST.resolve("etc/gosh_profile"), tmp.resolve("home/etc/gosh_profile"),
                java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Path out = tmp.resolve("out.txt");
        Path err = tmp.resolve("err.txt");
        Process p = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("launcher did not exit within 120 s: " + Files.readString(err));
        }
        return new Run(p.exitValue(), Files.readString(out), Files.readString(err));
    }

    @Test
    void lbListsEveryProjectBundleActive() throws Exception {
        Run r = launch("-c", "lb -s");
        assertEquals(0, r.exit(), r.err());
        for (String m : List.of("peer-mem-api", "sim-kernel", "hca-sim", "ib-core", "rdma-tools", "umem-test", "mlx4-provider", "mlx5-provider",
                "example-peer-mem", "gpu-peer-mem", "ssd-peer-mem")) {
            assertTrue(r.out().lines().anyMatch(l -> l.contains("Active") && l.contains("org.peerdirect." + m + " ")),
                    m + " ACTIVE in:\n" + r.out());
        }
    }

    @Test
    void anUnknownCommandFailsAndIsNamed() throws Exception {
        Run r = launch("-c", "lb; no:such; lb");
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("command failed: no:such"), r.err());
    }

    @Test
    void theDemoRunsToTheEnd() throws Exception {
        Run r = launch("demo");
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.out().contains("peerdirect> lb"), r.out());
    }

    @Test
    void aBundleFromAJarPathIsInstalledAndStartedAtRunTime() throws Exception {
        Path jar = tmp.resolve("hello.jar");
        Manifest mf = new Manifest();
        Attributes a = mf.getMainAttributes();
        a.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        a.putValue("Bundle-ManifestVersion", "2");
        a.putValue("Bundle-SymbolicName", "org.example.hotloaded");
        a.putValue("Bundle-Version", "1.2.3");
        try (OutputStream os = Files.newOutputStream(jar); JarOutputStream j = new JarOutputStream(os, mf)) {
            j.closeEntry();
        }
        Run r = launch("-c", "start " + jar.toUri() + "; lb -s hotloaded");
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.out().lines().anyMatch(l -> l.contains("Active") && l.contains("org.example.hotloaded (1.2.3)")),
                r.out() + r.err());
    }

    @Test
    void aBundleFromAMavenCoordinateIsInstalledAndStartedAtRunTime() throws Exception {
        // an OSGi API bundle the build itself compiles against, so it is in the local repository
        Run r = launch("-c", "start mvn:org.osgi/org.osgi.service.log/1.5.0; lb -s org.osgi.service.log");
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.out().lines().anyMatch(l -> l.contains("Active") && l.contains("org.osgi.service.log (1.5.0")),
                r.out() + r.err());
    }

    @Test
    void badArgumentsAreAUsageError() throws Exception {
        Run r = launch("--frobnicate");
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("unknown argument '--frobnicate'"), r.err());
    }

}
