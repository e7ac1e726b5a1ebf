package org.peerdirect.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The guest alone (the JVM's shared one, {@link SharedGuest}), facing a bare UDP end: it boots, rxe0 is ACTIVE and the tools
 * see it; its {@code ibv_rc_pingpong} client, given a made-up peer over the real out-of-band
 * protocol, puts RoCEv2 frames on the UDP socket that decode, carry the QPN and PSN the exchange
 * said, pass this project's ICRC check and, where tshark is installed, decode without a
 * malformed packet.
 */
class RxeGuestTest {

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void theGuestBootsWithRxe0ActiveAndTheToolsSeeIt() throws Exception {
        try (WireEnd wire = new WireEnd(SharedGuest.hostWirePort())) {
            RxeGuest g = SharedGuest.get();
            assertTrue(g.gidIndex >= 0, "the guest has an IPv4-mapped GID");
            RxeGuest.Result dev = g.run("ibv_devices", Duration.ofSeconds(60));
            assertEquals(0, dev.rc(), dev.text());
            assertTrue(dev.text().contains("rxe0"), dev.text());
            RxeGuest.Result info = g.run("ibv_devinfo -d rxe0 -v", Duration.ofSeconds(60));
            assertEquals(0, info.rc(), info.text());
            assertTrue(info.text().contains("PORT_ACTIVE"), info.text());
            assertTrue(info.text().matches("(?s).*link_layer:\\s+Ethernet.*"), info.text());
            assertTrue(info.text().contains("::ffff:" + RxeGuest.GUEST_IP + ", RoCE v2"), info.text());
            assertTrue(info.text().matches("(?s).*active_mtu:\\s+1024 \\(3\\).*"), "a 1500-byte link gives IB MTU 1024: " + info.text());
        } finally {
            SharedGuest.release();
        }
    }

    /**
     * The guest is rebuilt when its sources change: RxeGuest's hash of the script, the roles and
     * pd_rc.c is the one build-guest.sh writes into its stamp (computed here by the shell, as the
     * script does), and a stamp of other sources is out of date. No QEMU needed.
     */
    @Test
    void aStampOfOtherSourcesIsOutOfDate(@org.junit.jupiter.api.io.TempDir Path tmp) throws Exception {
        Process p = new ProcessBuilder("bash", "-c", "cd interop/guest && cat build-guest.sh roles/*.sh *.c | sha256sum | cut -c1-16")
                .directory(RxeGuest.top().toFile()).redirectErrorStream(true).start();
        String hash = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII).strip();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0 && hash.matches("[0-9a-f]{16}"), "the shell's hash: " + hash);
        Files.writeString(tmp.resolve("stamp"), "6.1.0-56-amd64 " + hash + "\n");
        assertTrue(RxeGuest.stampCurrent(tmp), "the shell's stamp is current");
        Files.writeString(tmp.resolve("stamp"), "6.1.0-56-amd64 0123456789abcdef\n");
        assertTrue(!RxeGuest.stampCurrent(tmp), "another hash is out of date");
    }

    /** {@code "%04x:%06x:%06x:%s\0"}: ibv_rc_pingpong's 52-byte address message (ROCE_WIRE §5.7). */
    private static byte[] ppMessage(int lid, int qpn, int psn, String gidHex) {
        byte[] m = String.format("%04x:%06x:%06x:%s", lid, qpn, psn, gidHex).getBytes(StandardCharsets.US_ASCII);
        assertEquals(51, m.length);
        return java.util.Arrays.copyOf(m, 52);
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void theGuestsRcPingpongClientSendsFramesThatDecodeAndPassTheIcrcCheck() throws Exception {
        int fakeQpn = 0x000123;
        try (WireEnd wire = new WireEnd(SharedGuest.hostWirePort()); ServerSocket oob = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            RxeGuest g = SharedGuest.get();
            wire.guest(g.guestWirePort);
            oob.setSoTimeout(120_000);
            // the host side of pp_server_exch_dest: read the client's address, answer with ours, read "done"
            CompletableFuture<String> exchange = CompletableFuture.supplyAsync(() -> {
                try (Socket s = oob.accept()) {
                    s.setSoTimeout(60_000);
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    byte[] theirs = in.readNBytes(52);
                    out.write(ppMessage(0, fakeQpn, 0x000000, "00000000000000000000ffff0a630001"));
                    out.flush();
                    byte[] done = in.readNBytes(5);
                    assertEquals("done\0", new String(done, StandardCharsets.US_ASCII));
                    return new String(theirs, StandardCharsets.US_ASCII);
                } catch (IOException e) {
                    throw new IllegalStateException(e);
                }
            });
            long t0 = System.nanoTime();
            // in the background: nobody answers it, SharedGuest.release ends it
            g.start("ibv_rc_pingpong -p " + oob.getLocalPort() + " -g " + g.gidIndex + " -s 64 -n 3 " + RxeGuest.HOST_FROM_GUEST + " &");
            String theirs = exchange.get(120, TimeUnit.SECONDS);
            assertEquals(52, theirs.length(), "52 bytes including the NUL");
            assertEquals('\0', theirs.charAt(51));
            String[] f = theirs.substring(0, 51).split(":");
            assertEquals("00000000000000000000ffff0a630002", f[3], "the guest's GID: ::ffff:" + RxeGuest.GUEST_IP + ", bytes in order");
            int guestQpn = Integer.parseInt(f[1], 16);
            int guestPsn = Integer.parseInt(f[2], 16);
            // nobody ACKs: rxe retransmits the SEND (timeout 14, about 67 ms) forever (retry_cnt 7)
            List<RoceFrames.Roce> got = wire.awaitRoce(2, Duration.ofSeconds(60));
            System.out.printf("rxe guest: %d RoCEv2 frames %.1f s after the client started (QPN 0x%06x, PSN 0x%06x)%n", got.size(),
                    (System.nanoTime() - t0) / 1e9, guestQpn, guestPsn);
            RoceFrames.Roce first = got.get(0);
            assertEquals(0x04, first.opcode(), "RC SEND_ONLY");
            assertEquals(fakeQpn, first.destQp(), "to the QPN our message gave");
            assertEquals(guestPsn, first.psn(), "the PSN the guest's message gave");
            assertEquals(64, first.payloadLen());
            assertEquals(0, first.padCount());
            assertEquals(0xffff, first.pkey());
            assertTrue(first.ackReq(), "the last packet of a message asks for an ACK");
            assertEquals(0x0a630002, first.srcIp());
            assertEquals(0x0a630001, first.dstIp());
            assertTrue(first.df(), "rxe sets DF");
            assertEquals(0, first.udpChecksum(), "rxe sends UDP checksum 0");
            for (RoceFrames.Roce r : got) {
                assertTrue(r.icrcOk(), "ICRC of " + r);
                assertTrue(r.ipChecksumOk(), "IPv4 header checksum of " + r);
                assertEquals(guestPsn, r.psn(), "a retransmission repeats the PSN: " + r);
            }
            assertTrue(wire.arpsAnswered() >= 1, "the guest resolved 10.99.0.1 by ARP before sending");
            tsharkDecodes(wire.frames(), "rc-client-frames");
        } finally {
            SharedGuest.release(); // its client retransmits to a peer that never answers: killed
        }
    }

    /**
     * Where tshark is installed (CI installs it): the frames, written as a pcap, decode as
     * InfiniBand over UDP 4791 with no malformed packet and no warning.
     */
    static void tsharkDecodes(List<byte[]> frames, String name) throws Exception {
        if (!RxeGuest.onPath("tshark")) {
            System.out.println("tshark is not installed (Debian package tshark): the capture was checked by the ICRC check only");
            return;
        }
        Path pcap = Path.of("target", "interop", name + ".check.pcap");
        Files.createDirectories(pcap.getParent());
        RoceFrames.writePcap(pcap, frames);
        String bad = tshark(pcap, "-Y", "_ws.malformed || _ws.expert.severity >= \"Warning\"");
        assertEquals("", bad.strip(), "tshark flags malformed frames in " + pcap);
        String ops = tshark(pcap, "-Y", "infiniband", "-T", "fields", "-e", "infiniband.bth.opcode");
        long roce = frames.stream().filter(f -> RoceFrames.decode(f) != null).count();
        assertEquals(roce, ops.lines().count(), "tshark decodes every RoCEv2 frame as InfiniBand: " + ops);
    }

    private static String tshark(Path pcap, String... args) throws Exception {
        List<String> cmd = new java.util.ArrayList<>(List.of("tshark", "-n", "-r", pcap.toString(), "--disable-protocol", "rpcordma"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "tshark did not end within 60 s");
        assertEquals(0, p.exitValue(), "tshark " + cmd + ": " + out);
        return out;
    }
}
