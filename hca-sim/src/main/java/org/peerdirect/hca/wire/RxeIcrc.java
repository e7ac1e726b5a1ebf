package org.peerdirect.hca.wire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The invariant CRC of a RoCEv2 packet ({@code rxe_icrc.c}): CRC-32/IEEE over 8 bytes of 0xFF
 * (the LRH a RoCEv2 packet lacks), the IPv4 header with TOS, TTL and checksum masked to ones,
 * the UDP header with its checksum masked, the BTH with byte 4 (FECN/BECN/resv8a) masked, and
 * then everything after the BTH up to the ICRC (extension headers, payload, pad). The IP ID is
 * covered. Stored little-endian in the last 4 bytes of the UDP payload.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/infiniband/sw/rxe/rxe_icrc.c">rxe_icrc_hdr</a>
 */
public final class RxeIcrc {

    private static final ValueLayout.OfInt LE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);

    private RxeIcrc() {
    }

    /**
     * The ICRC of the packet whose IPv4 header starts at {@code ip} and whose IP total length is
     * {@code ipLen} (the ICRC its last 4 bytes). The caller checked the lengths ({@link RxeNet#parse}).
     */
    public static int compute(Frame f, int ip, int ipLen) {
        MemorySegment s = f.seg;
        int ihl = (s.get(ValueLayout.JAVA_BYTE, ip) & 0xF) * 4;
        byte[] m = f.masked;
        int n = 0;
        for (int i = 0; i < 8; i++) {
            m[n++] = (byte) 0xFF;
        }
        int hdr = ihl + RxeNet.UDP_BYTES + RxeHdr.BTH_BYTES;
        MemorySegment.copy(s, ValueLayout.JAVA_BYTE, ip, m, n, hdr);
        m[n + 1] = (byte) 0xFF; // TOS
        m[n + 8] = (byte) 0xFF; // TTL
        m[n + 10] = (byte) 0xFF; // header checksum
        m[n + 11] = (byte) 0xFF;
        m[n + ihl + 6] = (byte) 0xFF; // UDP checksum
        m[n + ihl + 7] = (byte) 0xFF;
        m[n + ihl + RxeNet.UDP_BYTES + 4] = (byte) 0xFF; // BTH resv8a (FECN, BECN)
        f.crc.reset();
        f.crc.update(m, 0, n + hdr);
        int restFrom = ip + hdr;
        int restTo = ip + ipLen - RxeHdr.ICRC_BYTES;
        if (restTo > restFrom) {
            int limit = f.buf.limit();
            int pos = f.buf.position();
            f.buf.limit(Frame.CAPACITY).position(restFrom).limit(restTo);
            f.crc.update(f.buf);
            f.buf.limit(Frame.CAPACITY).position(pos).limit(limit);
        }
        return (int) f.crc.getValue();
    }

    /** Writes the ICRC into the packet's last 4 bytes, little-endian. */
    public static void fill(Frame f, int ip, int ipLen) {
        f.seg.set(LE32, ip + ipLen - 4, compute(f, ip, ipLen));
    }

    /** The ICRC the packet carries (little-endian). */
    public static int stored(Frame f, int ip, int ipLen) {
        return f.seg.get(LE32, ip + ipLen - 4);
    }
}
