package org.peerdirect.interop;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Linux kernel's rxe as a peer: the guest {@code interop/guest/build-guest.sh} builds (a stock
 * Debian kernel, rdma-core's tools, perftest), booted by QEMU under TCG (no KVM here) in topology
 * B of {@code reference/ROCE_WIRE.md} §3.3: its eth0 (rxe0) on a UDP socket pair on 127.0.0.1,
 * one Ethernet frame per datagram ({@code -netdev socket,udp=}); its eth1 on QEMU's user network,
 * which carries the tools' out-of-band TCP (the guest reaches the host's 127.0.0.1 as
 * {@code 10.0.2.2}; the host reaches the guest's port 18515 at {@link #oobPort}).
 *
 * <p>The console is QEMU's stdio serial: a reader thread collects its lines (and copies them to
 * {@code target/interop/<name>.log}); {@link #await} and {@link #run} wait for a line with a
 * deadline and fail naming what did not appear, with the console's tail, when it passes or QEMU
 * exits first. Never a hang: {@link #close} powers the guest off, or kills QEMU when it does not go
 * within 10 s.
 */
final class RxeGuest implements AutoCloseable {

    /** The guest's address on the wire, and the host side's (the project's port) on the same /24. */
    static final String GUEST_IP = "10.99.0.2";
    static final String HOST_IP = "10.99.0.1";
    /** How the guest reaches the host's 127.0.0.1 (QEMU user networking's host alias). */
    static final String HOST_FROM_GUEST = "10.0.2.2";
    /** The guest's wire MAC (QEMU's virtio-net on the UDP socket). */
    static final String GUEST_MAC = "52:54:00:00:00:02";
    /** Boot to "rxe0 up": 9 s measured on a quiet 2-core machine; TCG on a shared one is several times slower. */
    static final Duration BOOT = Duration.ofSeconds(180);

    /** The guest's kernel and initramfs, and the kernel release. */
    record Artifacts(Path kernel, Path initrd, String kver) {
    }

    private final Process qemu;
    /** Kills QEMU at JVM exit if the test did not close the guest (a JVM ended by a timeout, a crash). */
    private final Thread reaper;
    private final List<String> lines = new ArrayList<>(); // guarded by itself
    private final PrintWriter log;
    private final OutputStream stdin;
    private final String name;
    /** The host's UDP port the guest's NIC sends its frames to, and the one it receives them on. */
    final int hostWirePort;
    final int guestWirePort;
    /** Host TCP port forwarded to the guest's 18515 (the tools' default out-of-band port). */
    final int oobPort;
    /** Seconds from QEMU's start to "GUEST-UP" (rxe0 added, its GIDs printed). */
    double bootSeconds;
    /** The guest's GID index of its IPv4-mapped (RoCE v2) GID, the tools' {@code -g}/{@code -x}. */
    int gidIndex = -1;
    private int seq;
    private int consumed; // guarded by lines
    private final java.util.Map<Integer, Integer> begun = new java.util.HashMap<>(); // guarded by lines: a command's first output line

    private RxeGuest(String name, Process qemu, PrintWriter log, int hostWirePort, int guestWirePort, int oobPort) {
        this.name = name;
        this.qemu = qemu;
        this.log = log;
        this.stdin = qemu.getOutputStream();
        this.hostWirePort = hostWirePort;
        this.guestWirePort = guestWirePort;
        this.oobPort = oobPort;
        this.reaper = new Thread(qemu::destroyForcibly, "rxe-guest-reaper-" + name);
    }

    /** The repository's top folder (the one with {@code interop/guest/build-guest.sh}), from the test's working directory up. */
    static Path top() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("interop/guest/build-guest.sh"))) {
                return p;
            }
        }
        throw new IllegalStateException("interop/guest/build-guest.sh not found above " + Path.of("").toAbsolutePath());
    }

    static boolean onPath(String exe) {
        for (String d : System.getenv().getOrDefault("PATH", "").split(":")) {
            if (!d.isEmpty() && Files.isExecutable(Path.of(d, exe))) {
                return true;
            }
        }
        return false;
    }

    /**
     * The guest, built by {@code build-guest.sh} when it is not there yet (13 s; it needs apt-get and
     * Debian's package lists). A test skips, naming the package, where QEMU is missing or the guest
     * cannot be built; CI installs and builds both ({@code .ci/run}).
     */
    static synchronized Artifacts artifacts() {
        assumeTrue(onPath("qemu-system-x86_64"), "qemu-system-x86_64 is not installed: the rxe interop tests need the Debian package "
                + "qemu-system-x86 (apt-get install --no-install-recommends qemu-system-x86; .ci/run installs it)");
        Path dir = top().resolve("build/guest");
        if (!Files.isRegularFile(dir.resolve("initrd.cpio")) || !Files.isRegularFile(dir.resolve("vmlinuz"))) {
            String why = buildGuest(dir);
            assumeTrue(why == null, () -> "the rxe guest could not be built (" + why + "): interop/guest/build-guest.sh needs apt-get, "
                    + "Debian's package lists (apt-get update, once, as root) and the package linux-image-amd64");
        } else if (!stampCurrent(dir)) {
            // the script, a role or the guest's program (pd_rc.c) changed since the guest was built: build it again
            String why = buildGuest(dir);
            if (why != null) {
                System.out.println("rxe guest: rebuilding the out-of-date guest failed (" + why + "): the old one is used");
            }
        }
        try {
            return new Artifacts(dir.resolve("vmlinuz"), dir.resolve("initrd.cpio"), Files.readString(dir.resolve("kver")).trim());
        } catch (IOException e) {
            throw new IllegalStateException("reading " + dir.resolve("kver"), e);
        }
    }

    /**
     * Whether {@code dir/stamp} names the sources as they are now: build-guest.sh's stamp ends with
     * the first 16 hex digits of the SHA-256 of the script, {@code roles/*.sh} and {@code *.c} in
     * that order (the shell's glob order).
     */
    static boolean stampCurrent(Path dir) {
        try {
            Path g = top().resolve("interop/guest");
            java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
            md.update(Files.readAllBytes(g.resolve("build-guest.sh")));
            for (String glob : new String[] {"roles/*.sh", "*.c"}) {
                Path base = glob.startsWith("roles/") ? g.resolve("roles") : g;
                String pattern = glob.substring(glob.indexOf('/') + 1);
                try (var files = Files.newDirectoryStream(base, pattern)) {
                    List<Path> sorted = new ArrayList<>();
                    files.forEach(sorted::add);
                    sorted.sort(null);
                    for (Path f : sorted) {
                        md.update(Files.readAllBytes(f));
                    }
                }
            }
            String hash = java.util.HexFormat.of().formatHex(md.digest()).substring(0, 16);
            Path stamp = dir.resolve("stamp");
            return Files.isRegularFile(stamp) && Files.readString(stamp).strip().endsWith(" " + hash);
        } catch (IOException | java.security.NoSuchAlgorithmException e) {
            return true; // nothing to compare with: use what is there
        }
    }

    /** Runs build-guest.sh with a 5-minute bound; null when it built, else its last line. */
    private static String buildGuest(Path dir) {
        try {
            Process p = new ProcessBuilder("bash", top().resolve("interop/guest/build-guest.sh").toString(), dir.toString()).redirectErrorStream(true)
                    .start();
            p.getOutputStream().close();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8); // ends when the script does
            if (!p.waitFor(300, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return "build-guest.sh did not finish within 300 s";
            }
            System.out.print(out);
            String[] ls = out.strip().split("\n");
            return p.exitValue() == 0 ? null : ls[ls.length - 1];
        } catch (IOException e) {
            return e.toString();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }

    /** A free port on 127.0.0.1 (UDP or TCP) for QEMU to bind; the small race with other programs is accepted. */
    static int freePort(boolean udp) {
        try {
            if (udp) {
                try (DatagramSocket s = new DatagramSocket(0, InetAddress.getLoopbackAddress())) {
                    return s.getLocalPort();
                }
            }
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                return s.getLocalPort();
            }
        } catch (IOException e) {
            throw new IllegalStateException("no free port on 127.0.0.1", e);
        }
    }

    /**
     * Boots the guest with {@code role} ({@code interop/guest/roles/<role>.sh}; {@code shell} takes
     * commands through {@link #run}); its NIC sends to 127.0.0.1:{@code hostWirePort} and listens on
     * a free port ({@link #guestWirePort}). Returns once rxe0 is up (the console's "GUEST-UP").
     */
    static RxeGuest boot(String name, String role, int hostWirePort) throws IOException {
        return boot(name, role, hostWirePort, freePort(true));
    }

    /** {@link #boot(String, String, int)} with the guest's NIC on 127.0.0.1:{@code guestWire} (a peer that must know it first). */
    static RxeGuest boot(String name, String role, int hostWirePort, int guestWire) throws IOException {
        return boot(name, role, hostWirePort, guestWire, null);
    }

    /** {@link #boot(String, String, int, int)} with QEMU's capture of the wire NIC ({@code filter-dump}, classic pcap) into {@code pcap}. */
    static RxeGuest boot(String name, String role, int hostWirePort, int guestWire, Path pcap) throws IOException {
        Artifacts a = artifacts();
        int oob = freePort(false);
        Path logDir = Path.of("target", "interop");
        Files.createDirectories(logDir);
        List<String> cmd = new ArrayList<>(List.of("qemu-system-x86_64", "-accel", "tcg,tb-size=128", "-cpu", "max", "-smp", "1", "-m", "256", "-display", "none",
                "-monitor", "none", "-no-reboot", "-kernel", a.kernel().toString(), "-initrd", a.initrd().toString(), "-serial", "stdio",
                "-append", "console=ttyS0 loglevel=4 panic=-1 ip=" + GUEST_IP + " mgmt=10.0.2.15 role=" + role,
                "-netdev", "socket,id=n0,udp=127.0.0.1:" + hostWirePort + ",localaddr=127.0.0.1:" + guestWire,
                "-device", "virtio-net-pci,netdev=n0,mac=" + GUEST_MAC,
                "-netdev", "user,id=m0,hostfwd=tcp:127.0.0.1:" + oob + "-:18515", "-device", "virtio-net-pci,netdev=m0,mac=52:54:00:00:00:99"));
        if (pcap != null) {
            cmd.addAll(List.of("-object", "filter-dump,id=d0,netdev=n0,file=" + pcap.toAbsolutePath()));
        }
        PrintWriter log = new PrintWriter(Files.newBufferedWriter(logDir.resolve(name + ".log")), true);
        log.println("# " + String.join(" ", cmd));
        long t0 = System.nanoTime();
        Process q = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        RxeGuest g = new RxeGuest(name, q, log, hostWirePort, guestWire, oob);
        Runtime.getRuntime().addShutdownHook(g.reaper); // a test JVM that exits early leaves no QEMU behind
        Thread.ofPlatform().daemon().name("rxe-guest-console-" + name).start(g::readConsole);
        try {
            g.await("RXE: rxe0 on eth0", BOOT, "rxe0 added on eth0 (rdma link add)");
            Matcher m = g.await(Pattern.compile("GIDX=(\\d+) GID="), Duration.ofSeconds(30), "the guest's RoCE v2 GID index");
            g.gidIndex = Integer.parseInt(m.group(1));
            g.await("GUEST-UP", Duration.ofSeconds(30), "the end of the guest's bring-up");
        } catch (RuntimeException | Error e) {
            g.close();
            throw e;
        }
        g.bootSeconds = (System.nanoTime() - t0) / 1e9;
        System.out.printf("rxe guest %s: rxe0 up in %.1f s (kernel %s)%n", name, g.bootSeconds, a.kernel());
        return g;
    }

    private void readConsole() {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(qemu.getInputStream(), StandardCharsets.UTF_8))) {
            for (String l; (l = r.readLine()) != null;) {
                log.println(l);
                synchronized (lines) {
                    lines.add(l);
                    lines.notifyAll();
                }
            }
        } catch (IOException e) {
            log.println("# console: " + e);
        } finally {
            synchronized (lines) {
                lines.notifyAll();
            }
        }
    }

    /** {@link #await(Pattern, Duration, String)} of a literal text. */
    Matcher await(String text, Duration limit, String what) {
        return await(Pattern.compile(Pattern.quote(text)), limit, what);
    }

    /**
     * The first console line after the last one matched that contains {@code p}; an
     * {@link AssertionError} naming {@code what} when {@code limit} passes or QEMU exits first.
     */
    Matcher await(Pattern p, Duration limit, String what) {
        long deadline = System.nanoTime() + limit.toNanos();
        synchronized (lines) {
            while (true) {
                for (; consumed < lines.size(); consumed++) {
                    Matcher m = p.matcher(lines.get(consumed));
                    if (m.find()) {
                        consumed++;
                        return m;
                    }
                }
                long left = deadline - System.nanoTime();
                if (left <= 0 || (!qemu.isAlive() && consumed >= lines.size())) {
                    throw new AssertionError(String.format("rxe guest %s: %s did not appear on the console within %d s%s; console tail:%n%s", name, what,
                            limit.toSeconds(), qemu.isAlive() ? "" : " (QEMU exited with " + qemu.exitValue() + ")", tail(25)));
                }
                try {
                    lines.wait(Math.max(1, Math.min(left / 1_000_000, 500)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError("interrupted waiting for " + what);
                }
            }
        }
    }

    /** The last {@code n} console lines. */
    String tail(int n) {
        synchronized (lines) {
            return String.join("\n", lines.subList(Math.max(0, lines.size() - n), lines.size()));
        }
    }

    /** A command's exit status and the console lines it printed. */
    record Result(int rc, List<String> output) {
        String text() {
            return String.join("\n", output);
        }
    }

    /**
     * Runs {@code command} in the guest's shell (role {@code shell}) and waits at most
     * {@code limit} for it to end. The command line typed is echoed by the console; the end marker
     * is split in it ({@code PD""END}) so that only the shell's output matches.
     */
    Result run(String command, Duration limit) {
        return end(begin(command), limit);
    }

    /** Starts {@code command} in the guest's shell; {@link #end} waits for it. Returns its number. */
    int begin(String command) {
        int n = ++seq;
        type("echo PD\"\"BEGIN-" + n + "; " + command + "; echo PD\"\"END-" + n + "=$?");
        await("PDBEGIN-" + n, Duration.ofSeconds(60), "the start of '" + command + "'");
        synchronized (lines) {
            begun.put(n, consumed);
        }
        return n;
    }

    /**
     * Starts a server {@code command} in the background of the guest's shell and returns, with its
     * number for {@link #end}, once a socket listens on TCP {@code port} in the guest: a C client
     * does not retry, and QEMU's port forward accepts the host's connection before the guest has
     * a listener (then drops it).
     */
    int beginServer(String command, int port) {
        int n = ++seq;
        String listening = String.format(":%04X [0-9A-F]*:0000 0A", port); // /proc/net/tcp{,6}: local port, state LISTEN
        type("echo PD\"\"BEGIN-" + n + "; ( " + command + "; echo PD\"\"END-" + n + "=$? ) & while ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q '"
                + listening + "'; do usleep 50000; done; echo PD\"\"LISTEN-" + n);
        await("PDBEGIN-" + n, Duration.ofSeconds(60), "the start of '" + command + "'");
        synchronized (lines) {
            begun.put(n, consumed);
        }
        await("PDLISTEN-" + n, Duration.ofSeconds(60), "a listener on the guest's port " + port + " for '" + command + "'");
        return n;
    }

    /** Waits at most {@code limit} for command {@code n} ({@link #begin}) to end: its status and output. */
    Result end(int n, Duration limit) {
        Matcher m = await(Pattern.compile("PDEND-" + n + "=(\\d+)"), limit, "the end of command " + n);
        synchronized (lines) {
            return new Result(Integer.parseInt(m.group(1)), List.copyOf(lines.subList(begun.remove(n), consumed - 1)));
        }
    }

    /** Starts {@code command} in the guest's shell without waiting; {@link #await} its output. */
    void start(String command) {
        type(command);
    }

    private void type(String line) {
        try {
            stdin.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            stdin.flush();
        } catch (IOException e) {
            throw new AssertionError("rxe guest " + name + ": the console does not take input (QEMU gone?): " + e + "; tail:\n" + tail(10), e);
        }
    }

    boolean alive() {
        return qemu.isAlive();
    }

    /** Powers the guest off (the shell's exit ends /init), or kills QEMU when it is still there after 10 s. */
    @Override
    public void close() {
        try {
            if (qemu.isAlive()) {
                try {
                    stdin.write("exit\n".getBytes(StandardCharsets.UTF_8));
                    stdin.flush();
                } catch (IOException ignored) {
                    // QEMU went meanwhile
                }
                if (!qemu.waitFor(10, TimeUnit.SECONDS)) {
                    qemu.destroyForcibly();
                    qemu.waitFor(10, TimeUnit.SECONDS);
                }
            }
        } catch (InterruptedException e) {
            qemu.destroyForcibly();
            Thread.currentThread().interrupt();
        } finally {
            log.close();
            removeReaper();
        }
    }

    private void removeReaper() {
        try {
            Runtime.getRuntime().removeShutdownHook(reaper);
        } catch (IllegalStateException shuttingDown) {
            // the JVM is exiting: the hook runs anyway, and QEMU is gone already
        }
    }

    /** Kills QEMU at once: a guest whose tool still runs (retransmitting to a peer that never answers). */
    void kill() {
        qemu.destroyForcibly();
        try {
            qemu.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            log.close();
            removeReaper();
        }
    }
}
