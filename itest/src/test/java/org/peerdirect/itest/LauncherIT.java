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
        Process p = start(tmp.resolve("out.txt"), args);
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("launcher did not exit within 120 s: " + Files.readString(tmp.resolve("out.txt.err")));
        }
        return new Run(p.exitValue(), Files.readString(tmp.resolve("out.txt")), Files.readString(tmp.resolve("out.txt.err")));
    }

    /**
     * Starts the launcher on the test's home; its output goes to {@code out} (null: a pipe, read
     * from {@link Process#getInputStream}), its errors to {@code out.err} ({@code piped.err}).
     */
    private Process start(Path out, String... args) throws Exception {
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
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
        Path errors = out != null ? Path.of(out + ".err") : tmp.resolve("piped.err");
        pb.redirectError(errors.toFile());
        if (out != null) {
            pb.redirectOutput(out.toFile());
        }
        return pb.start();
    }

    /**
     * The SSD's durability promise with a real process kill: in a running container an RDMA WRITE
     * places record A in the SSD's persistent memory region and the PMR write barrier runs, record
     * D is written and made durable by an IBA 1.5 RDMA FLUSH (persistent placement) from the
     * adapter, then record B is written and not flushed; the container gets SIGKILL. On restart A
     * and D are there and B is not (it was only posted; D's flush covered D's range only). Then a clean stop (the driver's normal shutdown) keeps what was
     * posted: record C, written without a flush, is there on the next start.
     */
    @Test
    void dataRdmaWroteIntoTheSsdSurvivesKillMinus9OnceFlushed() throws Exception {
        Path out = tmp.resolve("piped");
        Process p = start(null, "-c", "rdma:put -d mlx5_0 --mem ssd_mem --offset 0 --text durable-record-A; ssd:flush; "
                + "rdma:put -d mlx5_0 --mem ssd_mem --offset 12288 --text rdma-flushed-record-D --flush; "
                + "rdma:put -d mlx5_0 --mem ssd_mem --offset 4096 --text posted-record-B; echo ready-for-kill; rdma:write_bw -n 100000000");
        var reader = new java.io.BufferedReader(new java.io.InputStreamReader(p.getInputStream(), java.nio.charset.StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        // read until the marker, bounded: a child that never gets there is killed after 90 s
        var ready = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                for (String line; (line = reader.readLine()) != null;) {
                    synchronized (seen) {
                        seen.append(line).append('\n');
                    }
                    if (line.equals("ready-for-kill")) {
                        return true;
                    }
                }
                return false;
            } catch (java.io.IOException e) {
                return false;
            }
        });
        boolean up;
        try {
            up = ready.get(90, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            up = false;
        }
        String before;
        synchronized (seen) {
            before = seen.toString();
        }
        if (!up) {
            p.destroyForcibly();
        }
        assertTrue(up, "the writes were done in the running container: " + before + Files.readString(Path.of(out + ".err")));
        assertTrue(before.contains("RDMA READ back: the same bytes"), before);
        Process kill = new ProcessBuilder("kill", "-9", Long.toString(p.pid())).start();
        assertEquals(0, kill.waitFor(), "kill -9 sent");
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the container died");
        assertEquals(137, p.exitValue(), "killed by SIGKILL");

        assertTrue(before.contains("RDMA FLUSH (placement PERSISTENT, level RANGE) of the 21 bytes: SUCCESS"), before);
        Run after = launch("-c", "ssd:read 0 16; ssd:read 4096 15; ssd:read 12288 21; "
                + "rdma:put -d mlx5_0 --mem ssd_mem --offset 8192 --text clean-stop-C");
        assertEquals(0, after.exit(), after.err());
        assertTrue(after.out().contains("nvme0 PMR 0x0+16: durable-record-A"), "flushed before the kill: there\n" + after.out());
        assertTrue(after.out().contains("nvme0 PMR 0x3000+21: rdma-flushed-record-D"), "made durable by an RDMA FLUSH: there\n" + after.out());
        assertTrue(after.out().contains("nvme0 PMR 0x1000+15: ..............."), "posted, not flushed: lost with the process\n" + after.out());
        Run clean = launch("-c", "ssd:read 8192 12");
        assertEquals(0, clean.exit(), clean.err());
        assertTrue(clean.out().contains("nvme0 PMR 0x2000+12: clean-stop-C"), "a clean stop shuts the SSD down normally\n" + clean.out());
    }

    @Test
    void lbListsEveryProjectBundleActive() throws Exception {
        Run r = launch("-c", "lb -s");
        assertEquals(0, r.exit(), r.err());
        for (String m : List.of("peer-mem-api", "sim-kernel", "hca-sim", "ib-core", "rdma-tools", "doca-core", "flexio-dev", "flexio", "doca-dpa-dev", "doca-dpa", "doca-rdma", "doca-verbs", "dpa-samples", "umem-test", "mlx4-provider", "mlx5-provider",
                "example-peer-mem", "gpu-sim", "nvidia", "gpu-peer-mem", "ssd-sim", "nvme", "ssd-peer-mem")) {
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
        // the DPA part: the three FlexIO samples' key lines, and dpa:mm's finding after them
        assertTrue(r.out().contains("rpc_calculate(7, 35) = 42"), "dpa:sample rpc\n" + r.out());
        assertTrue(r.out().contains("sent \"msg-7-echo\"  came back \"MSG-7-ECHO\"")
                && r.out().contains("8 of 8 messages echoed in order"), "dpa:sample echo\n" + r.out());
        assertTrue(r.out().contains("no echo came back") && r.out().contains("FLEXIO_ERR_STATUS_FATAL_ERROR")
                && r.out().contains("(called from org.peerdirect.dpa.samples.dev.EchoDev."), "dpa:sample fence\n" + r.out());
        // DOCA's kernel launch sample: its first and last DOCA log lines with the kernel's line between them
        int start = r.out().indexOf("[DOCA][INF][dpa_kernel_launch_main.c:68][main] Starting the sample");
        int hello = r.out().indexOf("Hello from kernel", Math.max(start, 0));
        int done = r.out().indexOf("[DOCA][INF][dpa_kernel_launch_main.c:112][main] Sample finished successfully", Math.max(hello, 0));
        assertTrue(start >= 0 && hello > start && done > hello, "dpa:sample kernel_launch\n" + r.out());
        // DOCA's initiator/target sample: its first and last DOCA log lines with thread 2's line between them
        int itStart = r.out().indexOf("[DOCA][INF][dpa_initiator_target_main.c:64][main] Starting the sample");
        int itSet = r.out().indexOf("thread2_kernel: Set sync event value to 10", Math.max(itStart, 0));
        int itDone = r.out().indexOf("[DOCA][INF][dpa_initiator_target_main.c:110][main] Sample finished successfully", Math.max(itSet, 0));
        assertTrue(itStart >= 0 && itSet > itStart && itDone > itSet, "dpa:sample initiator_target\n" + r.out());
        assertTrue(r.out().contains("no DOCA DPA context in any process"), "dpa:doca after the sample\n" + r.out());
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

    /**
     * peerdirect:config returns once the re-created component runs: the next command must find
     * it. It once returned while SCR still showed the old instance with the new value, and the demo's
     * next command found nvidia-peermem gone (CI, demo smoke). Twelve switches, each followed at
     * once by a command that needs the component.
     */
    @Test
    void aConfigurationChangeIsInPlaceWhenTheCommandReturns() throws Exception {
        StringBuilder script = new StringBuilder();
        for (int i = 0; i < 12; i++) {
            script.append("peerdirect:config org.peerdirect.nvidia_peermem persistent_api_support ").append(i % 2 == 0 ? 0 : 1).append("; peermem:clients; ");
        }
        Run r = launch("-c", script.toString());
        assertEquals(0, r.exit(), r.err());
        // each listing after a switch shows the clients of the new value: nv_mem every time, nv_mem_nc after each 0
        assertEquals(12, r.out().lines().filter(l -> l.matches("\\d+\\s+nv_mem\\s.*registered.*")).count(), "every listing saw nv_mem:\n" + r.out());
        assertEquals(6, r.out().lines().filter(l -> l.matches("\\d+\\s+nv_mem_nc\\s.*registered.*")).count(), "nv_mem_nc after each 0:\n" + r.out());
        assertTrue(!r.out().contains("no component runs with it"), r.out());
    }

    @Test
    void badArgumentsAreAUsageError() throws Exception {
        Run r = launch("--frobnicate");
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("unknown argument '--frobnicate'"), r.err());
    }

}
