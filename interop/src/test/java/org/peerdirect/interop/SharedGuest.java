package org.peerdirect.interop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * One rxe guest per test JVM, shared by the interop suites ({@link RxeGuestTest},
 * {@link RxeInteropTest}, {@link WireFaultsConformanceTest}): a boot costs 10-40 s of TCG, the
 * guest keeps no state a suite depends on but its counters (which every suite reads as deltas).
 *
 * <p>Isolation: the guest's NIC always talks to the same pair of UDP ports on 127.0.0.1
 * ({@link #hostWirePort}, {@link #guestWirePort}); a suite binds the host one for itself (its
 * port's tunnel, a hand peer, a bare {@link WireEnd}) and closes it when done, so suites, which
 * surefire runs one after another in the JVM, never share a socket. Every host end that answers
 * for {@link RxeGuest#HOST_IP} uses the same MAC ({@link #HOST_MAC}), so the guest's neighbour
 * entry stays right from one suite to the next. {@link #release} ends the programs a suite left
 * running in the guest's shell and flushes its neighbour table; a suite that had to kill the
 * guest (a tool waiting for a peer that failed) gets a fresh one on its next {@link #get}, on the
 * same ports. The guest goes with the
 * JVM ({@link RxeGuest}'s shutdown hook).
 *
 * <p>Every boot captures the wire NIC ({@code target/interop/shared-<n>.pcap}); a suite that
 * checks captures takes the frames after its {@link #mark}.
 */
final class SharedGuest {

    /** The MAC of every host end facing the guest: WireGlue's 02:00 and the four bytes of 10.99.0.1. */
    static final long HOST_MAC = 0x0200_0a63_0001L;

    private static RxeGuest guest; // guarded by SharedGuest.class
    private static int hostWire;
    private static int guestWire;
    private static final List<Path> captures = new ArrayList<>(); // guarded by SharedGuest.class
    private static int boots;

    private SharedGuest() {
    }

    private static synchronized void ports() {
        if (hostWire == 0) {
            hostWire = RxeGuest.freePort(true);
            guestWire = RxeGuest.freePort(true);
        }
    }

    /** The host's UDP port the guest's NIC sends to: a suite binds it while it uses the guest. */
    static synchronized int hostWirePort() {
        ports();
        return hostWire;
    }

    /** The UDP port the guest's NIC listens on. */
    static synchronized int guestWirePort() {
        ports();
        return guestWire;
    }

    /**
     * The guest, booted on first use or when the last one is gone (skips, naming the package, where
     * QEMU or the guest's artifacts are missing).
     */
    static synchronized RxeGuest get() throws IOException {
        if (guest != null && guest.alive()) {
            return guest;
        }
        ports();
        Path pcap = Path.of("target", "interop", "shared-" + (++boots) + ".pcap");
        Files.createDirectories(pcap.getParent());
        guest = RxeGuest.boot("shared-" + boots, "shell", hostWire, guestWire, pcap);
        captures.add(pcap);
        System.out.printf("rxe guest: boot %d of this JVM (shared by the interop suites)%n", boots);
        return guest;
    }

    /** How many times this JVM booted the shared guest. */
    static synchronized int boots() {
        return boots;
    }

    /** A position in the captures: the frames a suite's traffic adds come after it. */
    record Mark(int capture, int frames) {
    }

    /** The captures' position now ({@link #framesSince}). */
    static synchronized Mark mark() throws IOException {
        if (captures.isEmpty()) {
            return new Mark(0, 0);
        }
        Path last = captures.get(captures.size() - 1);
        return new Mark(captures.size() - 1, Files.exists(last) ? RoceFrames.readPcap(last).size() : 0);
    }

    /** Every capture that holds frames after {@code m}, each with the frames after it: the suite's own traffic. */
    static synchronized List<java.util.Map.Entry<Path, List<byte[]>>> framesSince(Mark m) throws IOException {
        List<java.util.Map.Entry<Path, List<byte[]>>> out = new ArrayList<>();
        for (int i = m.capture(); i < captures.size(); i++) {
            List<byte[]> all = RoceFrames.readPcap(captures.get(i));
            int skip = i == m.capture() ? Math.min(m.frames(), all.size()) : 0;
            out.add(java.util.Map.entry(captures.get(i), all.subList(skip, all.size())));
        }
        return out;
    }

    /**
     * A suite is done with the guest: the tools it may have left in the background end, so the next
     * suite finds an idle shell and a free port 18515. A guest that does not answer is killed (the
     * next {@link #get} boots another).
     */
    static synchronized void release() {
        if (guest == null || !guest.alive()) {
            return;
        }
        try {
            // and the neighbour table forgotten: the next suite's host end is resolved by ARP afresh, as after a boot
            guest.run("killall -q ibv_rc_pingpong ibv_ud_pingpong ib_write_bw ib_read_bw ib_send_bw ib_write_lat pd_rc; wait; ip neigh flush dev eth0",
                    Duration.ofSeconds(60));
        } catch (AssertionError stuck) {
            System.out.println("rxe guest: the shell did not answer after a suite (" + stuck.getMessage().lines().findFirst().orElse("") + "): killed");
            guest.kill();
            guest = null;
        }
    }

    /** A suite killed the guest (its tool waits for a peer that is gone): the next {@link #get} boots another. */
    static synchronized void killed(RxeGuest g) {
        if (g != null) {
            g.kill();
        }
        if (guest == g) {
            guest = null;
        }
    }
}
