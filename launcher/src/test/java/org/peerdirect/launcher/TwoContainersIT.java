package org.peerdirect.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The demo's two-container part (issue 44): two {@code ./peerdirect --home} containers on this
 * machine, each one host, each with its ConnectX-6 Dx's port on a UDP tunnel to the other's
 * ({@code hca:wire}), run {@code rdma:pingpong} across them: the server in one, the client in the
 * other, the out-of-band exchange over TCP as ibv_rc_pingpong's, the data over real RoCEv2 frames,
 * validated; each shows rxe's counters. Bounded: both containers are killed when the run does not
 * end in time.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class TwoContainersIT {

    @TempDir
    Path tmp;

    private static int freePort(boolean udp) throws IOException {
        if (udp) {
            try (DatagramSocket s = new DatagramSocket(0)) {
                return s.getLocalPort();
            }
        }
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    /** A container with its own home running {@code commands}, its output gathered by the returned future. */
    private Process start(String home, String commands) throws IOException {
        Path dist = Path.of(System.getProperty("peerdirect.home", "target/peerdirect")).toAbsolutePath();
        String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = new ArrayList<>(List.of(javaBin, "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
                "-Dpeerdirect.home=" + dist, "-cp", System.getProperty("java.class.path"), "org.peerdirect.launcher.Main", "--home",
                tmp.resolve(home).toString(), "-c", commands));
        return new ProcessBuilder(cmd).redirectErrorStream(true).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                .start();
    }

    private static CompletableFuture<String> output(Process p) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                return e.toString();
            }
        });
    }

    /** One container's side: its port on the tunnel ({@code local} to {@code remote}, address {@code ip}), then {@code pingpong}, then its counters. */
    private static String side(int local, int remote, String ip, String pingpong) {
        return "w = (mlx5:bdf mlx5_1); hca:wire $w udp 127.0.0.1:" + local + " 127.0.0.1:" + remote + " " + ip + "; " + pingpong
                + "; rdma:statistic";
    }

    @Test
    void aPingpongCrossesTwoContainersOverTheUdpLink() throws Exception {
        int wa = freePort(true);
        int wb = freePort(true);
        int oob = freePort(false);
        Process server = start("a", side(wa, wb, "10.0.0.1", "rdma:pingpong -d mlx5_1 --server -p " + oob + " -s 4096 -n 100 -c"));
        Process client = null;
        try {
            client = start("b", side(wb, wa, "10.0.0.2", "rdma:pingpong -d mlx5_1 --client 127.0.0.1 -p " + oob + " -s 4096 -n 100 -c"));
            CompletableFuture<String> so = output(server);
            CompletableFuture<String> co = output(client);
            assertTrue(server.waitFor(240, TimeUnit.SECONDS) && client.waitFor(60, TimeUnit.SECONDS), "both containers ended in time");
            String s = so.get(10, TimeUnit.SECONDS);
            String c = co.get(10, TimeUnit.SECONDS);
            System.out.printf("two containers:%n--- server (home a)%n%s%n--- client (home b)%n%s%n", s, c);
            assertEquals(Main.OK, server.exitValue(), s);
            assertEquals(Main.OK, client.exitValue(), c);
            assertTrue(s.contains("validated 100 received buffers"), s);
            assertTrue(c.contains("validated 100 received buffers"), c);
            for (String out : new String[] {s, c}) {
                assertTrue(out.contains("udp 127.0.0.1:"), "the port went on the tunnel: " + out);
                assertTrue(out.matches("(?s).*sent_pkts [1-9]\\d*.*rcvd_pkts [1-9]\\d*.*"), "frames crossed: " + out);
                assertTrue(out.contains("rcvd_icrc_err 0"), "every ICRC right: " + out);
            }
        } finally {
            server.destroyForcibly();
            if (client != null) {
                client.destroyForcibly();
            }
        }
    }
}
