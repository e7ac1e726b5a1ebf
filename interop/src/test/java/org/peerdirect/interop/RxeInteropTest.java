package org.peerdirect.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * peerdirect against the Linux kernel's rxe (issue 44 item 4): the guest's {@code ibv_rc_pingpong},
 * {@code ibv_ud_pingpong}, {@code ib_write_bw}, {@code ib_read_bw}, {@code ib_send_bw} and
 * {@code ib_write_lat} against the rdma:* tools on a
 * ConnectX-6 Dx whose port 1 is on a UDP tunnel to the guest's NIC (10.99.0.1 here, 10.99.0.2
 * there; each side addresses the other by its IPv4-mapped GID: the guest's {@code -g}/{@code -x}
 * from its console, peerdirect's tools pick theirs), each direction with peerdirect as server and as client, the
 * pingpongs validating data ({@code -c}). One host for the class, the JVM's shared guest; each test is one
 * command on each side, the guest's through its console, the out-of-band TCP through QEMU's user
 * network. Skips, naming why, until the port can have a wire link, and where QEMU is missing.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class RxeInteropTest {

    private static final Duration RUN = Duration.ofSeconds(180);
    /** The port's address on the wire (its RoCE v2 GID is ::ffff:10.99.0.1). */
    private static final int HOST_IP = 0x0a630001;

    @TempDir
    Path tmp;
    Cx6Host host;
    RxeGuest guest;

    /** Where this suite's frames start in the shared guest's captures. */
    private SharedGuest.Mark mark;

    /**
     * The host with its port on the wire (on the shared guest's host port), and the guest
     * ({@link SharedGuest}: booted once per JVM), made ready by the first test that runs; a guest
     * killed by a failed test is booted again on the same UDP ports. A test skips, saying why, when
     * the port cannot have a wire link in this build or QEMU is missing.
     */
    @BeforeEach
    void ready() throws Exception {
        WireGlue.assumeWire();
        RxeGuest.artifacts();
        long t0 = System.nanoTime();
        if (host == null) {
            host = new Cx6Host(tmp);
            WireGlue.attach(host.model, 1, SharedGuest.hostWirePort(), SharedGuest.guestWirePort(), HOST_IP);
        }
        if (guest == null || !guest.alive()) {
            guest = SharedGuest.get();
            if (mark == null) {
                mark = SharedGuest.mark(); // this suite's frames come after
            }
            System.out.printf("rxe interop: host and guest ready in %.1f s%n", (System.nanoTime() - t0) / 1e9);
        }
    }

    /**
     * The guest's background programs end (it stays for the next suite), the host's audit runs,
     * then every frame of this suite in the captures of the guest's NIC (QEMU's filter-dump: both
     * directions) must pass this project's ICRC check frame by frame and, where tshark is
     * installed, decode with no malformed packet.
     */
    @AfterAll
    void down() throws Exception {
        try {
            SharedGuest.release();
        } finally {
            if (host != null) {
                host.close(); // the audit
            }
        }
        if (mark == null) {
            return; // no test ran against the guest
        }
        long roce = 0;
        for (var e : SharedGuest.framesSince(mark)) {
            Path pcap = e.getKey();
            java.util.List<byte[]> frames = e.getValue();
            long here = 0;
            for (byte[] f : frames) {
                RoceFrames.Roce r = RoceFrames.decode(f);
                if (r != null) {
                    here++;
                    assertTrue(r.icrcOk(), pcap + ": a frame with a wrong ICRC: " + r);
                    assertTrue(r.ipChecksumOk(), pcap + ": a frame with a wrong IPv4 checksum: " + r);
                }
            }
            roce += here;
            System.out.printf("rxe interop: %s: %d frames of this suite, %d RoCEv2, every ICRC right%n", pcap, frames.size(), here);
            RxeGuestTest.tsharkDecodes(frames, "interop-" + pcap.getFileName().toString().replace(".pcap", ""));
        }
        assertTrue(roce > 0, "the captures hold no RoCEv2 frame of this suite");
    }

    /** The guest's server command, then peerdirect's client towards it through the forwarded port. */
    private String[] guestServes(String guestCmd, TwoHosts.Command client) throws Exception {
        long t0 = System.nanoTime();
        int n = guest.beginServer(guestCmd, 18515);
        String ours;
        try {
            ours = client.run();
        } catch (Exception | Error e) {
            SharedGuest.killed(guest); // its server waits for a client that is gone
            guest = null;
            throw e;
        }
        RxeGuest.Result r = guest.end(n, RUN);
        System.out.printf("rxe interop: '%s' against peerdirect's client: rc %d in %.1f s%n%s%n%s%n", guestCmd, r.rc(), (System.nanoTime() - t0) / 1e9,
                r.text(), ours);
        assertEquals(0, r.rc(), "the guest's " + guestCmd + ":\n" + r.text());
        return new String[] {r.text(), ours};
    }

    /** peerdirect's server on its own thread, then the guest's client towards 10.0.2.2 (the host's 127.0.0.1). */
    private String[] guestConnects(int port, TwoHosts.Command server, String guestCmd) throws Exception {
        long t0 = System.nanoTime();
        String[] out = TwoHosts.both(server, () -> {
            awaitListening(port);
            RxeGuest.Result r = guest.run(guestCmd, RUN);
            assertEquals(0, r.rc(), "the guest's " + guestCmd + ":\n" + r.text());
            return r.text();
        });
        System.out.printf("rxe interop: '%s' against peerdirect's server in %.1f s%n%s%n%s%n", guestCmd, (System.nanoTime() - t0) / 1e9, out[1], out[0]);
        return new String[] {out[1], out[0]};
    }

    /**
     * Until peerdirect's server listens on {@code port} (a bind to it fails), at most 60 s: the
     * guest's C client does not retry. A probe that connected would be taken for the client.
     */
    private static void awaitListening(int port) throws InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            try (java.net.ServerSocket probe = new java.net.ServerSocket()) {
                probe.setReuseAddress(false);
                probe.bind(new java.net.InetSocketAddress("127.0.0.1", port));
            } catch (java.io.IOException inUse) {
                return;
            }
            assertTrue(System.nanoTime() < deadline, "peerdirect's server did not listen on " + port + " within 60 s");
            Thread.sleep(50); // poll pace: the server is another thread's program
        }
    }

    private static void noInvalidData(String guestOut) {
        assertFalse(guestOut.contains("invalid data"), "rc_pingpong -c found invalid data:\n" + guestOut);
    }

    @Test
    void rcPingpongGuestServerPeerdirectClient() throws Exception {
        String[] o = guestServes("ibv_rc_pingpong -d rxe0 -g " + guest.gidIndex + " -s 4096 -n 200 -c",
                () -> host.tools.pingpong("--client", "127.0.0.1", "-p", String.valueOf(guest.oobPort), "-s", "4096", "-n", "200", "-c"));
        noInvalidData(o[0]);
        assertTrue(o[0].contains("1638400 bytes in"), o[0]);
        assertTrue(o[1].contains("validated 200 received buffers"), o[1]);
    }

    @Test
    void rcPingpongPeerdirectServerGuestClient() throws Exception {
        int p = RxeGuest.freePort(false);
        String[] o = guestConnects(p, () -> host.tools.pingpong("--server", "-p", String.valueOf(p), "-s", "3000", "-n", "100", "-c"),
                "ibv_rc_pingpong -d rxe0 -p " + p + " -g " + guest.gidIndex + " -s 3000 -n 100 -c " + RxeGuest.HOST_FROM_GUEST);
        noInvalidData(o[0]);
        assertTrue(o[1].contains("validated 100 received buffers of 3000 bytes"), o[1]);
    }

    @Test
    void udPingpongGuestServerPeerdirectClient() throws Exception {
        String[] o = guestServes("ibv_ud_pingpong -d rxe0 -g " + guest.gidIndex + " -s 1024 -n 200 -c",
                () -> host.tools.ud_pingpong("--client", "127.0.0.1", "-p", String.valueOf(guest.oobPort), "-s", "1024", "-n", "200", "-c"));
        noInvalidData(o[0]);
        assertTrue(o[1].contains("validated 200 received payloads"), o[1]);
    }

    @Test
    void udPingpongPeerdirectServerGuestClient() throws Exception {
        int p = RxeGuest.freePort(false);
        String[] o = guestConnects(p, () -> host.tools.ud_pingpong("--server", "-p", String.valueOf(p), "-s", "512", "-n", "100", "-c"),
                "ibv_ud_pingpong -d rxe0 -p " + p + " -g " + guest.gidIndex + " -s 512 -n 100 -c " + RxeGuest.HOST_FROM_GUEST);
        noInvalidData(o[0]);
        assertTrue(o[1].contains("validated 100 received payloads of 512 bytes"), o[1]);
    }

    /** The guest's perftest row for {@code size}: its average bandwidth, which must be above zero. */
    private static void perftestRow(String out, int size) {
        Matcher m = Pattern.compile("(?m)^\\s*" + size + "\\s+(\\d+)\\s+([0-9.]+)\\s+([0-9.]+)").matcher(out);
        assertTrue(m.find(), "no perftest row for " + size + " B:\n" + out);
        assertTrue(Double.parseDouble(m.group(3)) > 0, m.group());
    }

    @Test
    void writeBwGuestServerPeerdirectClient() throws Exception {
        String[] o = guestServes("ib_write_bw -d rxe0 -x " + guest.gidIndex + " -s 65536 -n 100",
                () -> host.tools.write_bw("--client", "127.0.0.1", "-p", String.valueOf(guest.oobPort), "-s", "65536", "-n", "100"));
        perftestRow(o[0], 65536); // the guest's server prints the figures our client sent
        perftestRow(o[1], 65536);
    }

    @Test
    void writeBwPeerdirectServerGuestClient() throws Exception {
        int p = RxeGuest.freePort(false);
        String[] o = guestConnects(p, () -> host.tools.write_bw("--server", "-p", String.valueOf(p), "-s", "65536", "-n", "100"),
                "ib_write_bw -d rxe0 -p " + p + " -x " + guest.gidIndex + " -s 65536 -n 100 " + RxeGuest.HOST_FROM_GUEST);
        perftestRow(o[0], 65536);
        perftestRow(o[1], 65536);
    }

    @Test
    void readBwGuestServerPeerdirectClient() throws Exception {
        String[] o = guestServes("ib_read_bw -d rxe0 -x " + guest.gidIndex + " -s 65536 -n 100",
                () -> host.tools.read_bw("--client", "127.0.0.1", "-p", String.valueOf(guest.oobPort), "-s", "65536", "-n", "100"));
        perftestRow(o[0], 65536);
        perftestRow(o[1], 65536);
    }

    @Test
    void readBwPeerdirectServerGuestClient() throws Exception {
        int p = RxeGuest.freePort(false);
        String[] o = guestConnects(p, () -> host.tools.read_bw("--server", "-p", String.valueOf(p), "-s", "65536", "-n", "100"),
                "ib_read_bw -d rxe0 -p " + p + " -x " + guest.gidIndex + " -s 65536 -n 100 " + RxeGuest.HOST_FROM_GUEST);
        perftestRow(o[0], 65536);
        perftestRow(o[1], 65536);
    }
    @Test
    void sendBwGuestServerPeerdirectClient() throws Exception {
        String[] o = guestServes("ib_send_bw -d rxe0 -x " + guest.gidIndex + " -s 4096 -n 200",
                () -> host.tools.send_bw("--client", "127.0.0.1", "-p", String.valueOf(guest.oobPort), "-s", "4096", "-n", "200"));
        perftestRow(o[0], 4096);
        perftestRow(o[1], 4096);
    }

    @Test
    void sendBwPeerdirectServerGuestClient() throws Exception {
        int p = RxeGuest.freePort(false);
        String[] o = guestConnects(p, () -> host.tools.send_bw("--server", "-p", String.valueOf(p), "-s", "4096", "-n", "200"),
                "ib_send_bw -d rxe0 -p " + p + " -x " + guest.gidIndex + " -s 4096 -n 200 " + RxeGuest.HOST_FROM_GUEST);
        perftestRow(o[0], 4096);
        perftestRow(o[1], 4096);
    }

    @Test
    void writeLatGuestServerPeerdirectClient() throws Exception {
        String[] o = guestServes("ib_write_lat -d rxe0 -x " + guest.gidIndex + " -s 64 -n 100",
                () -> host.tools.write_lat("--client", "127.0.0.1", "-p", String.valueOf(guest.oobPort), "-s", "64", "-n", "100"));
        perftestRow(o[0], 64);
        perftestRow(o[1], 64);
    }

    @Test
    void writeLatPeerdirectServerGuestClient() throws Exception {
        int p = RxeGuest.freePort(false);
        String[] o = guestConnects(p, () -> host.tools.write_lat("--server", "-p", String.valueOf(p), "-s", "64", "-n", "100"),
                "ib_write_lat -d rxe0 -p " + p + " -x " + guest.gidIndex + " -s 64 -n 100 " + RxeGuest.HOST_FROM_GUEST);
        perftestRow(o[0], 64);
        perftestRow(o[1], 64);
    }
}
