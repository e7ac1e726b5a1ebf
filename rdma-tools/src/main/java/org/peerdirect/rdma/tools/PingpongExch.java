package org.peerdirect.rdma.tools;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.function.Consumer;

/**
 * The out-of-band exchange of rdma-core's {@code ibv_rc_pingpong}, {@code ibv_uc_pingpong} and
 * {@code ibv_ud_pingpong} ({@code libibverbs/examples/rc_pingpong.c}: {@code pp_client_exch_dest},
 * {@code pp_server_exch_dest}), byte for byte, so that either side can be the C program
 * (reference/ROCE_WIRE.md §5.7):
 * <ol>
 * <li>the client connects and sends its address, {@code "%04x:%06x:%06x:%s"} of LID, QPN, PSN and
 * the GID as 32 hex digits (the 16 bytes in order, {@code gid_to_wire_gid}), NUL-terminated:
 * {@link #MSG_SIZE} = 52 bytes;</li>
 * <li>the server reads it, connects its QP to the client (RTR/RTS; the peer's MAC is resolved
 * then) and only then sends its own address in the same format;</li>
 * <li>the client reads it and sends {@code "done\0"} (5 bytes), which the server reads.</li>
 * </ol>
 */
final class PingpongExch {

    /** {@code sizeof "0000:000000:000000:00000000000000000000000000000000"}. */
    static final int MSG_SIZE = 52;
    static final byte[] DONE = {'d', 'o', 'n', 'e', 0};

    /** {@code struct pingpong_dest}: one side's address. */
    record Dest(int lid, int qpn, int psn, byte[] gid) {
        Dest {
            if (gid.length != 16) {
                throw new IllegalArgumentException("a GID is 16 bytes, not " + gid.length);
            }
            gid = gid.clone();
        }

        /** The 52 bytes on the wire. */
        byte[] wire() {
            String s = String.format("%04x:%06x:%06x:%s", lid & 0xffff, qpn & 0xffffff, psn & 0xffffff, HexFormat.of().formatHex(gid));
            return Arrays.copyOf(s.getBytes(StandardCharsets.US_ASCII), MSG_SIZE);
        }

        /**
         * The address in {@code msg} (as {@code sscanf(msg, "%x:%x:%x:%s")} and {@code wire_gid_to_gid}
         * read it); an error quoting the message when it is not one.
         */
        static Dest parse(byte[] msg, String tool) {
            int end = 0;
            while (end < msg.length && msg[end] != 0) {
                end++;
            }
            String s = new String(msg, 0, end, StandardCharsets.US_ASCII);
            String[] f = s.split(":", -1);
            try {
                if (f.length != 4 || f[3].length() != 32) {
                    throw new IllegalArgumentException("not LID:QPN:PSN:GID");
                }
                return new Dest(Integer.parseInt(f[0], 16), Integer.parseInt(f[1], 16), Integer.parseInt(f[2], 16), HexFormat.of().parseHex(f[3]));
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(tool + ": Couldn't parse line <" + s + ">: " + e.getMessage() + " (is the peer ibv_*_pingpong?)", e);
            }
        }

        /**
         * Whether the address needs a GRH: the C tools address the peer by GID only when its
         * interface id (the low 8 bytes) is not zero ({@code if (dest->gid.global.interface_id)}).
         */
        boolean global() {
            for (int i = 8; i < 16; i++) {
                if (gid[i] != 0) {
                    return true;
                }
            }
            return false;
        }

        /** {@code LID 0x0001, QPN 0x000048, PSN 0x3f2a11, GID ::ffff:10.99.0.1}, as the C tools print an address. */
        String describe() {
            return String.format("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s", lid, qpn, psn, Inet6Text.format(gid));
        }
    }

    private PingpongExch() {
    }

    /** {@code pp_client_exch_dest}: sends {@code my}, returns the server's address, sends "done". */
    static Dest clientExchDest(String tool, String host, int port, Dest my) {
        try (OobSocket s = OobSocket.connect(tool, host, port)) {
            s.write(my.wire(), "the local address");
            Dest rem = Dest.parse(s.read(MSG_SIZE, "the remote address"), tool);
            s.write(DONE, "\"done\"");
            return rem;
        }
    }

    /**
     * {@code pp_server_exch_dest}: takes one client on {@code port}, reads its address, hands it
     * to {@code connect} (the QP goes to RTR/RTS before the server answers, as the C server does),
     * sends {@code my} and reads "done".
     */
    static Dest serverExchDest(String tool, int port, Dest my, Consumer<Dest> connect) {
        try (OobSocket s = OobSocket.accept(tool, port)) {
            Dest rem = Dest.parse(s.read(MSG_SIZE, "the remote address"), tool);
            connect.accept(rem);
            s.write(my.wire(), "the local address");
            byte[] done = s.read(DONE.length, "\"done\"");
            if (!Arrays.equals(done, DONE)) {
                throw new IllegalStateException(tool + ": the client sent " + Arrays.toString(done) + " where \"done\" ends the exchange");
            }
            return rem;
        }
    }
}
