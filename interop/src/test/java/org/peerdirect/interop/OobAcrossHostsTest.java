package org.peerdirect.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.shell.UsageException;

/**
 * The tools across hosts, both sides in this container: {@code --server} on mlx4_0 and
 * {@code --client 127.0.0.1} on mlx4_1, joined by the C tools' out-of-band TCP over loopback and
 * by the in-JVM fabric. Each side prints the other's address as the exchange delivered it.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class OobAcrossHostsTest {

    private static final Pattern ADDR = Pattern.compile("  (local|remote) address: +LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6}), GID (\\S+)");

    @TempDir
    Path tmp;
    TwoHosts hosts;

    @BeforeEach
    void up() {
        hosts = new TwoHosts(tmp);
    }

    @AfterEach
    void down() {
        hosts.close(); // the audit: no IOMMU fault, no mapping, no pin, every frame free
    }

    private static String port() {
        return String.valueOf(RxeGuest.freePort(false));
    }

    /** {local, remote} addresses as one side printed them. */
    private static String[] addresses(String out) {
        Matcher m = ADDR.matcher(out);
        String[] a = new String[2];
        while (m.find()) {
            a[m.group(1).equals("local") ? 0 : 1] = m.group(2) + ":" + m.group(3) + ":" + m.group(4) + ":" + m.group(5);
        }
        assertTrue(a[0] != null && a[1] != null, out);
        return a;
    }

    private static void crossed(String[] out) {
        String[] s = addresses(out[0]);
        String[] c = addresses(out[1]);
        assertEquals(s[0], c[1], "the client got the server's address");
        assertEquals(s[1], c[0], "the server got the client's address");
    }

    @Test
    void rcPingpongServerAndClientAcrossLoopback() throws Exception {
        String p = port();
        String[] out = TwoHosts.both(() -> hosts.tools.pingpong("--server", "-p", p, "-d", "mlx4_0", "-s", "10000", "-n", "50", "-c"),
                () -> hosts.tools.pingpong("--client", "127.0.0.1", "-p", p, "-d", "mlx4_1", "-s", "10000", "-n", "50", "-c"));
        System.out.println("pingpong --server:\n" + out[0] + "\npingpong --client:\n" + out[1]);
        crossed(out);
        for (String o : out) {
            assertTrue(o.contains("1000000 bytes in "), o);
            assertTrue(o.contains("validated 50 received buffers of 10000 bytes"), o);
        }
    }

    @Test
    void rcPingpongByGidWithEvents() throws Exception {
        String p = port();
        String[] out = TwoHosts.both(() -> hosts.tools.pingpong("--server", "-p", p, "-d", "mlx4_0", "-g", "0", "-e", "-n", "20", "-c"),
                () -> hosts.tools.pingpong("--client", "localhost", "-p", p, "-d", "mlx4_1", "-g", "0", "-n", "20", "-c"));
        crossed(out);
        assertTrue(addresses(out[0])[0].endsWith(":fe80::" + addresses(out[0])[0].split("fe80::")[1]), "GID 0 of an IB port is fe80::GUID: " + out[0]);
    }

    @Test
    void udPingpongServerAndClientAcrossLoopback() throws Exception {
        String p = port();
        String[] out = TwoHosts.both(() -> hosts.tools.ud_pingpong("--server", "-p", p, "-d", "mlx4_0", "-s", "1024", "-n", "30", "-c"),
                () -> hosts.tools.ud_pingpong("--client", "127.0.0.1", "-p", p, "-d", "mlx4_1", "-s", "1024", "-n", "30", "-c"));
        crossed(out);
        for (String o : out) {
            assertTrue(o.contains("61440 bytes in "), o);
            assertTrue(o.contains("validated 30 received payloads of 1024 bytes"), o);
        }
        String[] g = TwoHosts.both(() -> hosts.tools.ud_pingpong("--server", "-p", p, "-d", "mlx4_0", "-g", "0", "-n", "5"),
                () -> hosts.tools.ud_pingpong("--client", "127.0.0.1", "-p", p, "-d", "mlx4_1", "-g", "0", "-n", "5"));
        crossed(g);
    }

    /** The row perftest prints for {@code size} and {@code iters}: the client's measurement, which the server prints from the report exchange. */
    private static String row(String out, int size, int iters) {
        Matcher m = Pattern.compile("(?m)^ " + size + " +" + iters + " +([0-9.]+) +([0-9.]+) +([0-9.]+)$").matcher(out);
        assertTrue(m.find(), "no row for " + size + " B x " + iters + ":\n" + out);
        assertTrue(Double.parseDouble(m.group(2)) > 0, "a bandwidth: " + m.group());
        return m.group();
    }

    @Test
    void writeBwAndReadBwAcrossLoopbackTheServerPrintsTheClientsFigures() throws Exception {
        String p = port();
        String[] w = TwoHosts.both(() -> hosts.tools.write_bw("--server", "-p", p, "-d", "mlx4_0", "-s", "65536", "-n", "300"),
                () -> hosts.tools.write_bw("--client", "127.0.0.1", "-p", p, "-d", "mlx4_1", "-s", "65536", "-n", "300"));
        System.out.println("write_bw --server:\n" + w[0] + "\nwrite_bw --client:\n" + w[1]);
        assertEquals(row(w[1], 65536, 300), row(w[0], 65536, 300), "the server prints the figures the client sent (xchg_bw_reports)");
        assertTrue(w[0].contains(" remote address: LID ") && w[1].contains(" local address: LID "), w[1]);
        String[] r = TwoHosts.both(() -> hosts.tools.read_bw("--server", "-p", p, "-d", "mlx4_0", "-s", "4096", "-n", "200", "-q", "2", "-x", "0"),
                () -> hosts.tools.read_bw("--client", "127.0.0.1", "-p", p, "-d", "mlx4_1", "-s", "4096", "-n", "200", "-q", "2", "-x", "0"));
        assertEquals(row(r[1], 4096, 200), row(r[0], 4096, 200));
        assertTrue(r[1].contains(" GID: fe:80:"), "-x 0: the records carry GID 0 (108-byte format): " + r[1]);
    }

    @Test
    void sendBwAndWriteLatAcrossLoopback() throws Exception {
        String p = port();
        String[] s = TwoHosts.both(() -> hosts.tools.send_bw("--server", "-p", p, "-d", "mlx4_0", "-s", "8192", "-n", "500", "-q", "2"),
                () -> hosts.tools.send_bw("--client", "127.0.0.1", "-p", p, "-d", "mlx4_1", "-s", "8192", "-n", "500", "-q", "2"));
        row(s[0], 8192, 500); // each side prints its own figures (send_bw exchanges no report)
        row(s[1], 8192, 500);
        String[] l = TwoHosts.both(() -> hosts.tools.write_lat("--server", "-p", p, "-d", "mlx4_0", "-s", "64", "-n", "300"),
                () -> hosts.tools.write_lat("--client", "127.0.0.1", "-p", p, "-d", "mlx4_1", "-s", "64", "-n", "300"));
        System.out.println("write_lat --server:\n" + l[0] + "\nwrite_lat --client:\n" + l[1]);
        for (String o : l) {
            assertTrue(Pattern.compile("(?m)^ 64 +299 +[0-9.]+ ").matcher(o).find(), "a latency row of 299 round trips: " + o);
        }
        UsageException a = assertThrows(UsageException.class, () -> hosts.tools.send_bw("--server", "-a"));
        assertTrue(a.getMessage().startsWith("rdma:send_bw: -a is not supported with --server/--client yet"), a.getMessage());
    }

    @Test
    void aClientWithNoServerFailsNamingThePortWithinTheDeadline() {
        Thread t = Thread.currentThread();
        // bounded: the client retries a refused connection for 60 s; interrupting it (Ctrl-C) ends it at once
        Thread.ofPlatform().start(() -> {
            try {
                Thread.sleep(1_500);
            } catch (InterruptedException e) {
                return;
            }
            t.interrupt();
        });
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> hosts.tools.pingpong("--client", "127.0.0.1", "-p", port(), "-d", "mlx4_1", "-n", "1"));
        Thread.interrupted();
        assertTrue(e.getMessage().contains("rdma:pingpong") && e.getMessage().contains("interrupted"), e.getMessage());
    }

    @Test
    void optionsOfTwoLocalSidesAreRefusedAcrossHosts() {
        UsageException a = assertThrows(UsageException.class, () -> hosts.tools.pingpong("--server", "--server-dev", "mlx4_1"));
        assertEquals("rdma:pingpong: option --server-dev is not supported with --server: one side runs here, the other side's options are its own",
                a.getMessage());
        UsageException b = assertThrows(UsageException.class, () -> hosts.tools.pingpong("-p", "9999"));
        assertEquals("rdma:pingpong: option -p applies to a run across hosts: give --server or --client HOST too", b.getMessage());
        UsageException c = assertThrows(UsageException.class, () -> hosts.tools.ud_pingpong("--server", "--client", "h"));
        assertTrue(c.getMessage().startsWith("rdma:ud_pingpong: options --server and --client cannot be used together"), c.getMessage());
    }
}
