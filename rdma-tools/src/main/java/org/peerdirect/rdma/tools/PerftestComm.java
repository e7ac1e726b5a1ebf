package org.peerdirect.rdma.tools;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * perftest's out-of-band exchange over TCP ({@code src/perftest_communication.c} of perftest
 * 4.5-0.17, the one Debian 12 ships), byte for byte, so that either side can be {@code ib_write_bw}
 * or {@code ib_read_bw} (reference/ROCE_WIRE.md §5.7). Every exchange is {@code ctx_xchg_data}:
 * the client writes its part then reads the server's, the server reads then writes. In the order
 * {@code write_bw.c}/{@code read_bw.c} run them:
 * <ol>
 * <li>{@link #exchangeVersions}: 16 bytes, the version string NUL-padded ({@value #VERSION});
 * a peer older than 5.70 is refused as perftest refuses it;</li>
 * <li>{@link #checkSysData}: the cycle buffer (page size) and the cache line size, 4 bytes each,
 * big-endian; each side takes the larger;</li>
 * <li>{@link #checkMtu}: the port's active MTU as {@code enum ibv_mtu} in decimal text, 2 bytes
 * ({@code "3\0"}); each side takes the smaller valid one;</li>
 * <li>{@link #handShake} of each QP's {@link Dest} twice, then once more after RTR; once more
 * after the run ({@code ctx_hand_shake});</li>
 * <li>{@link #xchgBwReports}: size, iterations (8 bytes each), BW peak, BW average and message
 * rate (8-byte doubles), all big-endian;</li>
 * <li>{@link #close}: a last hand shake, then {@code "done\0"} each way.</li>
 * </ol>
 */
final class PerftestComm implements AutoCloseable {

    /** perftest 4.5-0.17's version string ({@code AC_INIT([perftest],[6.06])}). */
    static final String VERSION = "6.06";
    static final int MAX_VERSION = 16;
    /** {@code KEY_MSG_SIZE} and {@code KEY_MSG_SIZE_GID}. */
    static final int KEY_MSG_SIZE = 59;
    static final int KEY_MSG_SIZE_GID = 108;
    /** {@code sysconf(_SC_PAGESIZE)} and the cache line size this side reports. */
    static final int CYCLE_BUFFER = 4096;
    static final int CACHE_LINE = 64;

    /**
     * {@code struct pingpong_dest} as perftest sends it: LID, OUT_READS (the RDMA READs the QP
     * takes in flight), QPN, PSN, R_Key, the buffer's address, the GID (null: the format without
     * one, when neither side uses a GID) and the SRQ number (0 but for XRC/DC).
     */
    record Dest(int lid, int outReads, int qpn, int psn, int rkey, long vaddr, byte[] gid, int srqn) {

        /** {@code KEY_PRINT_FMT_GID} (108 bytes) with a GID, {@code KEY_PRINT_FMT} (59) without. */
        byte[] wire() {
            StringBuilder s = new StringBuilder(String.format("%04x:%04x:%06x:%06x:%08x:%016x:", lid & 0xffff, outReads & 0xffff, qpn & 0xffffff,
                    psn & 0xffffff, rkey, vaddr));
            if (gid == null) {
                s.append(String.format("%08x", srqn));
                return Arrays.copyOf(s.toString().getBytes(StandardCharsets.US_ASCII), KEY_MSG_SIZE);
            }
            for (byte b : gid) {
                s.append(String.format("%02x:", b & 0xff));
            }
            s.append(String.format("%08x:", srqn));
            return Arrays.copyOf(s.toString().getBytes(StandardCharsets.US_ASCII), KEY_MSG_SIZE_GID);
        }

        /** The record in {@code msg} ({@code ethernet_read_keys}); an error quoting it when it is not one. */
        static Dest parse(byte[] msg, boolean withGid, String tool) {
            int end = 0;
            while (end < msg.length && msg[end] != 0) {
                end++;
            }
            String s = new String(msg, 0, end, StandardCharsets.US_ASCII);
            String[] f = s.split(":", -1);
            try {
                if (f.length < (withGid ? 23 : 7)) {
                    throw new IllegalArgumentException("too few fields");
                }
                byte[] gid = null;
                if (withGid) {
                    gid = new byte[16];
                    for (int i = 0; i < 16; i++) {
                        gid[i] = (byte) Integer.parseInt(f[6 + i], 16);
                    }
                }
                return new Dest(Integer.parseInt(f[0], 16), Integer.parseInt(f[1], 16), Integer.parseInt(f[2], 16), Integer.parseInt(f[3], 16),
                        Integer.parseUnsignedInt(f[4], 16), Long.parseUnsignedLong(f[5], 16), gid, Integer.parseUnsignedInt(f[withGid ? 22 : 6], 16));
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(tool + ": Couldn't parse line <" + s + ">: " + e.getMessage()
                        + (withGid ? " (does the peer use a GID? give it -x too)" : ""), e);
            }
        }

        /** perftest's {@code ctx_print_pingpong_data} lines for {@code side} ("local" or "remote"). */
        String describe(String side) {
            return String.format(" %s address: LID %#06x QPN %#08x PSN %#08x OUT %#04x RKey %#010x VAddr %#018x%n%s", side, lid, qpn, psn, outReads,
                    rkey, vaddr, gid == null ? "" : " GID: " + HexFormat.ofDelimiter(":").formatHex(gid) + System.lineSeparator());
        }
    }

    /** {@code struct bw_report_data}'s exchanged part: what the client measured. */
    record BwReport(long size, long iters, double bwPeak, double bwAvg, double msgRate) {
    }

    private final OobSocket s;
    private final boolean client;
    private final String tool;

    private PerftestComm(OobSocket s, boolean client, String tool) {
        this.s = s;
        this.client = client;
        this.tool = tool;
    }

    /** {@code establish_connection}: the client connects to the server, the server takes one client. */
    static PerftestComm establish(String tool, Remote r) {
        return new PerftestComm(r.server() ? OobSocket.accept(tool, r.port()) : OobSocket.connect(tool, r.host(), r.port()), !r.server(), tool);
    }

    /** {@code ctx_xchg_data}: the client writes then reads, the server reads then writes. */
    byte[] xchg(byte[] mine, String what) {
        if (client) {
            s.write(mine, what);
            return s.read(mine.length, "the peer's " + what);
        }
        byte[] theirs = s.read(mine.length, "the peer's " + what);
        s.write(mine, what);
        return theirs;
    }

    /** {@code exchange_versions} and {@code check_version_compatibility}: the peer's version. */
    String exchangeVersions() {
        byte[] theirs = xchg(Arrays.copyOf(VERSION.getBytes(StandardCharsets.US_ASCII), MAX_VERSION), "version");
        int end = 0;
        while (end < theirs.length && theirs[end] != 0) {
            end++;
        }
        String v = new String(theirs, 0, end, StandardCharsets.US_ASCII);
        double num;
        try {
            num = Double.parseDouble(v.replaceAll("^([0-9]+(\\.[0-9]+)?).*", "$1"));
        } catch (NumberFormatException e) {
            num = 0;
        }
        if (num < 5.70) {
            throw new IllegalStateException(tool + ": the peer's perftest version '" + v + "': Current implementation is not compatible with versions "
                    + "older than 5.70");
        }
        return v;
    }

    /** {@code check_sys_data}: the larger cycle buffer and cache line size of both sides. */
    int[] checkSysData() {
        int cycle = ByteBuffer.wrap(xchg(ByteBuffer.allocate(4).putInt(CYCLE_BUFFER).array(), "cycle buffer size")).getInt();
        int line = ByteBuffer.wrap(xchg(ByteBuffer.allocate(4).putInt(CACHE_LINE).array(), "cache line size")).getInt();
        return new int[] {Math.max(cycle, CYCLE_BUFFER), Math.max(line, CACHE_LINE)};
    }

    /** {@code check_mtu}: the smaller of both ports' MTUs ({@code enum ibv_mtu}, 1-5), as "%d" in 2 bytes. */
    int checkMtu(int mine) {
        byte[] theirs = xchg(Arrays.copyOf(Integer.toString(mine).getBytes(StandardCharsets.US_ASCII), 2), "MTU");
        int rem = Character.isDigit(theirs[0]) ? theirs[0] - '0' : 0;
        return rem >= 1 && rem <= 5 && rem < mine ? rem : mine;
    }

    /** {@code ctx_hand_shake}: {@code my} for the peer's record of the same format. */
    Dest handShake(Dest my) {
        return Dest.parse(xchg(my.wire(), "address"), my.gid() != null, tool);
    }

    /** {@code xchg_bw_reports} (a peer of version 5.33 or later: 8-byte iterations; no per-port report). */
    BwReport xchgBwReports(BwReport my) {
        long size = ByteBuffer.wrap(xchg(ByteBuffer.allocate(8).putLong(my.size()).array(), "report (size)")).getLong();
        long iters = ByteBuffer.wrap(xchg(ByteBuffer.allocate(8).putLong(my.iters()).array(), "report (iterations)")).getLong();
        double peak = ByteBuffer.wrap(xchg(ByteBuffer.allocate(8).putDouble(my.bwPeak()).array(), "report (BW peak)")).getDouble();
        double avg = ByteBuffer.wrap(xchg(ByteBuffer.allocate(8).putDouble(my.bwAvg()).array(), "report (BW average)")).getDouble();
        double rate = ByteBuffer.wrap(xchg(ByteBuffer.allocate(8).putDouble(my.msgRate()).array(), "report (message rate)")).getDouble();
        return new BwReport(size, iters, peak, avg, rate);
    }

    /**
     * {@code ctx_close_connection}: a last hand shake, then "done" to the peer, which sends its
     * own; that one is read (an end of stream is fine) so that closing here resets nothing the
     * peer still writes.
     */
    void close(Dest my) {
        handShake(my);
        s.write(PingpongExch.DONE, "\"done\"");
        try {
            s.read(PingpongExch.DONE.length, "\"done\"");
        } catch (IllegalStateException peerClosed) {
            // the peer closed after its own "done": nothing more to say
        }
    }

    @Override
    public void close() {
        s.close();
    }
}
