package org.peerdirect.webconsole.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.TakesScreenshot;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.support.ui.WebDriverWait;

/**
 * Issue 46 items 1 and 2 as a user sees them: the built distribution started as
 * {@code ./peerdirect --web PORT} (a child JVM, RDMA WRITE traffic running in it), its pages opened
 * by a real headless Chromium (Selenium), {@code /metrics} checked by {@code promtool}, and the real
 * node_exporter reading the container's sysfs mirror. Screenshots go to {@code logs/}. A test
 * whose tool is missing skips, naming the Debian package ({@code .ci/run} installs them).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class WebConsoleIT {

    static final Path DIST = Path.of(System.getProperty("peerdirect.dist", "../launcher/target/peerdirect")).toAbsolutePath();
    static final Path CLASSES = Path.of(System.getProperty("peerdirect.launcher.classes", "../launcher/target/classes")).toAbsolutePath();
    static final Path LOGS = Path.of(System.getProperty("peerdirect.logs", "../logs")).toAbsolutePath();
    static final Path CHROMIUM = Path.of("/usr/bin/chromium");
    static final Path CHROMEDRIVER = Path.of("/usr/bin/chromedriver");
    static final String MARKER = "web-console-ready";
    /** Lines the shell echoes before dpa:caps, dpa:ps and mlx4:cmdlog, to cut their output apart. */
    static final String CAPS = "at-dpa-caps";
    static final String PS = "at-dpa-ps";
    static final String MLX4 = "at-mlx4-cmdlog";

    @TempDir
    static Path tmp;
    static Process container;
    static int port;
    static String base;
    /** What the shell printed before the marker: rdma:devices, peermem:clients, kernel:iommu. */
    static String shell;
    static final StringBuilder OUT = new StringBuilder();
    static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    /** Selenium warns at each start that it has no DevTools binding for this Chromium: not used here. Held: JUL keeps weak references. */
    static final java.util.logging.Logger SELENIUM_LOG = java.util.logging.Logger.getLogger("org.openqa.selenium");

    @BeforeAll
    static void start() throws Exception {
        port = freePort();
        base = "http://127.0.0.1:" + port;
        container = launcher("--web", Integer.toString(port), "-c",
                "rdma:devices; peermem:clients; kernel:iommu; echo " + CAPS + "; dpa:caps; echo " + PS + "; dpa:ps; echo " + MLX4
                        + "; mlx4:cmdlog -n 1; echo " + MARKER + "; rdma:write_bw -d mlx5_0 --odp -n 100000000").start();
        BufferedReader r = new BufferedReader(new InputStreamReader(container.getInputStream(), StandardCharsets.UTF_8));
        CompletableFuture<Boolean> ready = CompletableFuture.supplyAsync(() -> {
            try {
                for (String line; (line = r.readLine()) != null;) {
                    synchronized (OUT) {
                        OUT.append(line).append('\n');
                    }
                    if (line.equals(MARKER)) {
                        return true;
                    }
                }
            } catch (IOException e) {
                // the container died: not ready
            }
            return false;
        });
        boolean up = ready.get(120, TimeUnit.SECONDS);
        synchronized (OUT) {
            shell = OUT.toString();
        }
        assertTrue(up, "the container came up with --web: " + shell + Files.readString(tmp.resolve("err.txt")));
        assertTrue(shell.contains("web console at " + base), "the launcher prints the address: " + shell);
        // drain the rest (write_bw prints at its end only), so the child never blocks on a full pipe
        Thread drain = new Thread(() -> {
            try {
                while (r.readLine() != null) {
                    // nothing to keep
                }
            } catch (IOException e) {
                // closed at the end
            }
        }, "webconsole-it-drain");
        drain.setDaemon(true);
        drain.start();
        Files.createDirectories(LOGS);
    }

    @AfterAll
    static void stop() throws Exception {
        if (container != null) {
            container.destroy(); // SIGTERM: the launcher's shutdown hook stops the bundles in order
            if (!container.waitFor(60, TimeUnit.SECONDS)) {
                container.destroyForcibly();
            }
        }
    }

    /** The distribution's launcher as ./peerdirect starts it, in a home of this test. */
    static ProcessBuilder launcher(String... args) throws IOException {
        return launcherIn("home", args);
    }

    /** The same in another home of this test ({@code tmp/<home>}). */
    static ProcessBuilder launcherIn(String home, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Dpeerdirect.home=" + DIST,
                "-cp", CLASSES + java.io.File.pathSeparator + DIST.resolve("lib") + "/*", "org.peerdirect.launcher.Main",
                "--home", tmp.resolve(home).toString()));
        cmd.addAll(List.of(args));
        Files.createDirectories(tmp.resolve(home).resolve("etc"));
        Files.copy(DIST.resolve("etc/gosh_profile"), tmp.resolve(home).resolve("etc/gosh_profile"), StandardCopyOption.REPLACE_EXISTING);
        return new ProcessBuilder(cmd).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                .redirectError(tmp.resolve("err.txt").toFile());
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    static HttpResponse<String> get(String path) throws Exception {
        return HTTP.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(30)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    /** Word {@code word} of each line below a heading line of a shell command's table, {@code skip} lines after it (rdma:devices' underline). */
    static Set<String> column(String text, String heading, int skip, int word) {
        Set<String> out = new TreeSet<>();
        String[] lines = text.split("\n");
        for (int i = 0; i < lines.length; i++) {
            if (lines[i].strip().startsWith(heading)) {
                for (int j = i + 1 + skip; j < lines.length && !lines[j].isBlank() && !lines[j].startsWith("audit:")
                        && !lines[j].startsWith("#") && !lines[j].strip().startsWith("device") && !lines[j].startsWith("domain"); j++) {
                    out.add(lines[j].strip().split("\\s+")[word]);
                }
                return out;
            }
        }
        return out;
    }

    static ChromeDriver chromium() {
        SELENIUM_LOG.setLevel(java.util.logging.Level.SEVERE);
        assumeTrue(Files.isExecutable(CHROMIUM), "no " + CHROMIUM + ": install Debian's package 'chromium' to run the browser test");
        assumeTrue(Files.isExecutable(CHROMEDRIVER), "no " + CHROMEDRIVER + ": install Debian's package 'chromium-driver' to run the browser test");
        ChromeOptions o = new ChromeOptions();
        o.setBinary(CHROMIUM.toFile());
        o.addArguments("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,1000", "--user-data-dir=" + tmp.resolve("chromium-profile"));
        ChromeDriverService service = new ChromeDriverService.Builder().usingDriverExecutable(CHROMEDRIVER.toFile()).usingAnyFreePort().build();
        return new ChromeDriver(service, o);
    }

    static List<String> firstColumn(ChromeDriver b, String tableId) {
        List<String> out = new ArrayList<>();
        for (WebElement row : b.findElements(By.cssSelector("table#" + tableId + " tbody tr"))) {
            out.add(row.findElements(By.tagName("td")).get(0).getText().strip());
        }
        return out;
    }

    static void screenshot(ChromeDriver b, String name) throws IOException {
        Path png = ((TakesScreenshot) b).getScreenshotAs(OutputType.FILE).toPath();
        Files.copy(png, LOGS.resolve("webconsole-" + name + ".png"), StandardCopyOption.REPLACE_EXISTING);
    }

    @Test
    @Order(1)
    void everyPageListsWhatTheShellLists() throws Exception {
        Set<String> devices = column(shell, "device", 1, 0);
        Set<String> clients = column(shell, "#   name", 0, 1);
        Set<String> domains = column(shell, "domain", 0, 0);
        assertFalse(devices.isEmpty() || clients.isEmpty() || domains.isEmpty(), "the shell listed devices, clients, domains: " + shell);
        ChromeDriver b = chromium();
        try {
            b.get(base + "/system/console/pddevices");
            assertEquals(devices, new TreeSet<>(firstColumn(b, "devices")), "devices page vs rdma:devices");
            assertTrue(b.findElements(By.cssSelector("table#devices td")).stream().anyMatch(td -> td.getText().equals("4: ACTIVE")),
                    "the ports' state is shown");
            screenshot(b, "pddevices");
            b.get(base + "/system/console/pdpeermem");
            assertEquals(clients, new TreeSet<>(firstColumn(b, "peerclients")), "peer memory page vs peermem:clients");
            screenshot(b, "pdpeermem");
            b.get(base + "/system/console/pdiommu");
            assertEquals(domains, new TreeSet<>(firstColumn(b, "domains")), "IOMMU page vs kernel:iommu");
            assertTrue(b.findElement(By.id("audit")).getText().startsWith("audit: faults="), "the audit line");
            screenshot(b, "pdiommu");
            b.get(base + "/system/console/pdprocesses");
            assertTrue(b.findElements(By.cssSelector("table#processes tbody tr")).size() >= 1, "write_bw's processes are listed");
            screenshot(b, "pdprocesses");
            // write_bw's processes: one with a context, its ODP MR and its QP in RTS (rdma resource show)
            String pid = null;
            for (WebElement row : b.findElements(By.cssSelector("table#processes tbody tr"))) {
                List<WebElement> td = row.findElements(By.tagName("td"));
                if (Integer.parseInt(td.get(6).getText().strip()) > 0) {
                    pid = td.get(0).getText().strip();
                }
            }
            assertTrue(pid != null, "a process with a verbs context: " + b.findElement(By.id("processes")).getText());
            b.get(base + "/system/console/pdprocesses/" + pid);
            List<String> mrKinds = b.findElements(By.cssSelector("table#mrs-0 tbody tr td:nth-child(5)")).stream().map(WebElement::getText).toList();
            assertTrue(mrKinds.contains("ODP_EXPLICIT"), "write_bw --odp registered an explicit ODP MR: " + mrKinds);
            assertTrue(b.findElements(By.cssSelector("table#qps-0 tbody tr td:nth-child(3)")).stream().anyMatch(td -> td.getText().equals("RTS")),
                    "its QP is in RTS");
            screenshot(b, "pdprocess");
            b.get(base + "/system/console/pdmlx5");
            for (String d : devices.stream().filter(n -> n.startsWith("mlx5_")).toList()) {
                assertFalse(b.findElements(By.cssSelector("table#cmdlog-" + d + " tbody tr")).isEmpty(), d + "'s command log");
                assertTrue(firstColumn(b, "pages-" + d).contains("held"), d + "'s firmware pages");
                assertTrue(b.findElement(By.id("eqs-" + d)).getText().contains(d + ": eq 0 cmd"), d + "'s EQs: " + b.findElement(By.id("eqs-" + d)).getText());
            }
            screenshot(b, "pdmlx5");
            b.get(base + "/system/console/bundles");
            assertTrue(b.getPageSource().contains("org.peerdirect.webconsole"), "the Web Console's own bundle page lists ours");
            screenshot(b, "bundles");
        } finally {
            b.quit();
        }
    }

    @Test
    @Order(2)
    void aPlotGainsPointsWhileWriteBwRuns() throws Exception {
        ChromeDriver b = chromium();
        try {
            b.get(base + "/system/console/pdlive");
            WebDriverWait wait = new WebDriverWait(b, Duration.ofSeconds(60));
            // the page is not reloaded: the points come by server-sent events into the same page
            wait.until(d -> ((Number) b.executeScript("return window.pdPoints || 0")).intValue() >= 3);
            long first = ((Number) b.executeScript("return window.pdPoints")).longValue();
            wait.until(d -> ((Number) b.executeScript("return window.pdMaxBytes || 0")).doubleValue() > 0);
            wait.until(d -> ((Number) b.executeScript("return window.pdPoints")).longValue() >= first + 2);
            assertTrue(b.findElements(By.cssSelector("#plot-bytes canvas")).size() == 1, "uPlot drew the bytes chart");
            screenshot(b, "pdlive");
            // write_bw --odp's MR, with its own counters, on the devices page (class/infiniband/mlx5_0/odp/mrs)
            b.get(base + "/system/console/pddevices");
            List<String> odpMrs = firstColumn(b, "odpmrs-mlx5_0");
            assertTrue(odpMrs.stream().anyMatch(l -> l.contains("page_faults")), "the ODP MR with its counters: " + odpMrs);
        } finally {
            b.quit();
        }
    }

    @Test
    @Order(3)
    void aDeviceOrProcessThatIsNotThereIs404WithoutATrace() throws Exception {
        for (String path : List.of("/system/console/pddevices/mlx5_9", "/system/console/pdpeermem/no_such_client",
                "/system/console/pdprocesses/99999", "/system/console/pdmlx5/mlx5_9",
                "/system/console/pdmlx4/mlx4_9", "/system/console/pddpa/mlx5_9")) {
            HttpResponse<String> r = get(path);
            assertEquals(404, r.statusCode(), path + ": " + r.body());
            assertFalse(r.body().contains("Exception") || r.body().contains("\tat "), "no stack trace: " + r.body());
        }
        assertEquals(400, get("/system/console/pdprocesses/not-a-pid").statusCode());
    }

    @Test
    @Order(4)
    void promtoolAcceptsTheMetrics() throws Exception {
        HttpResponse<String> r = get("/metrics");
        assertEquals(200, r.statusCode());
        assertTrue(r.body().contains("peerdirect_iommu_dma_read_bytes_total{domain="), r.body());
        assertTrue(r.body().contains("peerdirect_dpa_processes{function=\""), "the BlueField-3's DPA: " + r.body());
        Path promtool = Path.of("/usr/bin/promtool");
        assumeTrue(Files.isExecutable(promtool), "no promtool: install Debian's package 'prometheus' to check /metrics with it");
        Process p = new ProcessBuilder(promtool.toString(), "check", "metrics").redirectErrorStream(true).start();
        p.getOutputStream().write(r.body().getBytes(StandardCharsets.UTF_8));
        p.getOutputStream().close();
        String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), "promtool check metrics: " + said);
    }

    @Test
    @Order(5)
    void nodeExporterReportsThePortsAsMetricsDoes() throws Exception {
        Path exporter = Path.of("/usr/bin/prometheus-node-exporter");
        assumeTrue(Files.isExecutable(exporter), "no node_exporter: install Debian's package 'prometheus-node-exporter' to check the sysfs mirror with it");
        int nePort = freePort();
        Process ne = new ProcessBuilder(exporter.toString(), "--path.sysfs=" + tmp.resolve("home/sys"), "--collector.disable-defaults",
                "--collector.infiniband", "--web.listen-address=127.0.0.1:" + nePort).redirectErrorStream(true)
                .redirectOutput(tmp.resolve("node_exporter.txt").toFile()).start();
        try {
            String seen = "";
            for (int i = 0; i < 100 && !seen.contains("node_infiniband_state_id"); i++) {
                try {
                    seen = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + nePort + "/metrics")).build(),
                            HttpResponse.BodyHandlers.ofString()).body();
                } catch (IOException notYet) {
                    Thread.sleep(100); // polling a child process's port, not synchronising threads
                }
            }
            assertTrue(seen.contains("node_scrape_collector_success{collector=\"infiniband\"} 1"), seen + Files.readString(tmp.resolve("node_exporter.txt")));
            Set<String> theirs = samples(seen, "node_infiniband_state_id");
            Set<String> ours = samples(get("/metrics").body(), "node_infiniband_state_id");
            assertFalse(theirs.isEmpty(), seen);
            assertEquals(theirs, ours, "node_exporter on the mirror and /metrics report the same ports and states");
            assertEquals(samples(seen, "node_infiniband_rate_bytes_per_second"), samples(get("/metrics").body(), "node_infiniband_rate_bytes_per_second"));
            // write_bw ran (Order 2): its device's port counters moved, node_exporter reads them from counters/, /metrics has the same series
            String sent = "node_infiniband_port_data_transmitted_bytes_total";
            Set<String> theirsSent = samples(seen, sent);
            assertTrue(theirsSent.stream().anyMatch(l -> !l.endsWith("=0.0")), "a port sent data: " + theirsSent + "\n" + seen);
            Set<String> oursSent = samples(get("/metrics").body(), sent);
            assertEquals(labels(theirsSent), labels(oursSent), "the same ports have counters in both");
        } finally {
            ne.destroy();
            ne.waitFor(30, TimeUnit.SECONDS);
        }
    }

    /** The {@code device/port} parts of {@link #samples}, without their values. */
    static Set<String> labels(Set<String> samples) {
        Set<String> out = new TreeSet<>();
        samples.forEach(l -> out.add(l.substring(0, l.lastIndexOf('='))));
        return out;
    }

    /** The lines the shell printed between echo {@code from} and the next echo of ours. */
    static List<String> section(String from) {
        List<String> out = new ArrayList<>();
        boolean in = false;
        for (String l : shell.split("\n")) {
            if (l.equals(from)) {
                in = true;
            } else if (in && (l.equals(CAPS) || l.equals(PS) || l.equals(MLX4) || l.equals(MARKER))) {
                break;
            } else if (in && !l.isBlank()) {
                out.add(l);
            }
        }
        return out;
    }

    /** Word 1 of the lines of {@code lines} whose first word is {@code what} ("process 5 uid ..." -> "5"). */
    static Set<String> ids(List<String> lines, String what) {
        Set<String> out = new TreeSet<>();
        for (String l : lines) {
            String[] w = l.strip().split("\\s+");
            if (w.length > 1 && w[0].equals(what)) {
                out.add(w[1]);
            }
        }
        return out;
    }

    static Set<String> cells(ChromeDriver b, String tablePrefix, int column) {
        Set<String> out = new TreeSet<>();
        for (WebElement td : b.findElements(By.cssSelector("table[id^='" + tablePrefix + "'] tbody tr td:nth-child(" + column + ")"))) {
            out.add(td.getText().strip());
        }
        return out;
    }

    /**
     * The DPA page lists what {@code dpa:caps} and {@code dpa:ps} list: every BlueField-3's
     * capability block field by field, its EU line, its processes and threads.
     */
    @Test
    @Order(8)
    void theDpaPageListsWhatDpaPsLists() throws Exception {
        List<String> caps = section(CAPS);
        List<String> ps = section(PS);
        assertFalse(caps.isEmpty() || caps.get(0).contains("no BlueField-3"), "the container has a BlueField-3: " + caps);
        Set<String> shellCaps = new TreeSet<>();
        for (String l : caps) {
            if (l.startsWith("  ")) {
                String[] w = l.strip().split("\\s+");
                shellCaps.add(w[0] + "=" + w[1]);
            }
        }
        ChromeDriver b = chromium();
        try {
            b.get(base + "/system/console/pddpa");
            Set<String> pageCaps = new TreeSet<>();
            for (WebElement row : b.findElements(By.cssSelector("table[id^='dpacaps-'] tbody tr"))) {
                List<WebElement> td = row.findElements(By.tagName("td"));
                pageCaps.add(td.get(0).getText().strip() + "=" + td.get(1).getText().strip());
            }
            assertEquals(shellCaps, pageCaps, "DPA page vs dpa:caps");
            assertTrue(pageCaps.contains("log_max_dpa_mem=28"), pageCaps.toString());
            String headings = b.findElements(By.tagName("h3")).stream().map(WebElement::getText).reduce("", (x, y) -> x + "\n" + y);
            assertTrue(headings.contains("mlx5_2 ("), "the BlueField-3 named as mlx5_core names it: " + headings);
            // dpa:ps' first line per device: "eus N (reserved R) busy B", or "no DPA object yet"
            for (String l : ps) {
                if (l.startsWith("  eus ") || l.startsWith("  no DPA object yet")) {
                    assertTrue(headings.contains(l.strip()), "DPA page vs dpa:ps '" + l.strip() + "': " + headings);
                }
            }
            assertEquals(ids(ps, "process"), cells(b, "dpaprocs-", 1), "DPA processes vs dpa:ps: " + ps);
            assertEquals(ids(ps, "thread"), cells(b, "dpathreads-", 1), "DPA threads vs dpa:ps: " + ps);
            assertEquals(ids(ps, "eu"), cells(b, "dpaeus-", 1), "EUs that ran vs dpa:ps: " + ps);
            screenshot(b, "pddpa");
        } finally {
            b.quit();
        }
    }

    /** The mlx4 page lists the devices {@code mlx4:cmdlog} lists, each with its recent commands. */
    @Test
    @Order(9)
    void theMlx4PageListsWhatMlx4CmdlogLists() throws Exception {
        Map<String, Long> shellTotals = new TreeMap<>();
        Matcher m = Pattern.compile("^(mlx4_\\d+) \\(.*\\): (\\d+) commands;", Pattern.MULTILINE).matcher(String.join("\n", section(MLX4)));
        while (m.find()) {
            shellTotals.put(m.group(1), Long.parseLong(m.group(2)));
        }
        assertFalse(shellTotals.isEmpty(), "mlx4:cmdlog listed devices: " + section(MLX4));
        ChromeDriver b = chromium();
        try {
            b.get(base + "/system/console/pdmlx4");
            for (Map.Entry<String, Long> e : shellTotals.entrySet()) {
                String d = e.getKey();
                WebElement h = b.findElements(By.tagName("h3")).stream().filter(x -> x.getText().startsWith(d + " (")).findFirst().orElseThrow(
                        () -> new AssertionError("no section for " + d));
                Matcher t = Pattern.compile("\\): (\\d+) commands").matcher(h.getText());
                assertTrue(t.find() && Long.parseLong(t.group(1)) >= e.getValue(), d + ": page " + h.getText() + " vs mlx4:cmdlog " + e.getValue());
                assertFalse(b.findElements(By.cssSelector("table#cmdlog-" + d + " tbody tr")).isEmpty(), d + "'s command log");
                assertTrue(firstColumn(b, "pages-" + d).contains("dma_pages_live"), d + "'s DMA pages");
            }
            assertEquals(shellTotals.keySet(), new TreeSet<>(b.findElements(By.cssSelector("table[id^='cmdlog-mlx4_']")).stream()
                    .map(x -> x.getAttribute("id").substring("cmdlog-".length())).toList()), "mlx4 page vs mlx4:cmdlog");
            screenshot(b, "pdmlx4");
        } finally {
            b.quit();
        }
    }

    /** "name{device="mlx5_0",port="1"} 4" -> "mlx5_0/1=4", the labels in any order, the value as a number. */
    static Set<String> samples(String text, String name) {
        Set<String> out = new TreeSet<>();
        Pattern line = Pattern.compile("^" + name + "\\{([^}]*)\\} (\\S+)$", Pattern.MULTILINE);
        Matcher m = line.matcher(text);
        while (m.find()) {
            Matcher dev = Pattern.compile("device=\"([^\"]*)\"").matcher(m.group(1));
            Matcher port = Pattern.compile("port=\"([^\"]*)\"").matcher(m.group(1));
            if (dev.find() && port.find()) {
                out.add(dev.group(1) + "/" + port.group(1) + "=" + Double.parseDouble(m.group(2)));
            }
        }
        return out;
    }

    @Test
    @Order(6)
    void anotherAddressWithoutCredentialsIsRefusedSayingHowToSetThem() throws Exception {
        ProcessBuilder pb = launcher("--web", "0.0.0.0:" + freePort(), "-c", "echo never");
        pb.redirectError(tmp.resolve("refused.txt").toFile());
        Process p = pb.start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        String err = Files.readString(tmp.resolve("refused.txt"));
        assertEquals(2, p.exitValue(), err);
        assertTrue(err.contains("-Dfelix.webconsole.username=") && err.contains("-Dfelix.webconsole.password="), err);
    }

    /**
     * {@code --keep-cache} keeps the framework's bundles between runs: a run without {@code --web}
     * after one with it must not start the web bundles (Jetty would listen on its default port, on
     * every address, behind the Web Console's default password).
     */
    @Test
    @Order(7)
    void aKeptCacheDoesNotServeTheConsoleWithoutWeb() throws Exception {
        Process first = launcherIn("kept", "--web", Integer.toString(freePort()), "-c", "echo first").redirectOutput(tmp.resolve("kept1.txt").toFile()).start();
        assertTrue(first.waitFor(120, TimeUnit.SECONDS));
        assertEquals(0, first.exitValue(), Files.readString(tmp.resolve("kept1.txt")) + Files.readString(tmp.resolve("err.txt")));
        Process second = launcherIn("kept", "--keep-cache", "-c", "lb").redirectOutput(tmp.resolve("kept2.txt").toFile()).start();
        assertTrue(second.waitFor(120, TimeUnit.SECONDS));
        String lb = Files.readString(tmp.resolve("kept2.txt"));
        assertEquals(0, second.exitValue(), lb + Files.readString(tmp.resolve("err.txt")));
        assertTrue(lb.contains("peerdirect :: ib-core") || lb.contains("Active"), "lb listed the bundles: " + lb);
        assertFalse(lb.contains("Jetty") || lb.contains("Web Console"), "no web bundle without --web: " + lb);
    }
}
