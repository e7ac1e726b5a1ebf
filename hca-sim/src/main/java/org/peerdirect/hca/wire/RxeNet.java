package org.peerdirect.hca.wire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * What rxe takes from the kernel's network stack and this port does itself ({@code rxe_net.c}):
 * Ethernet II, IPv4 (DF, its own ID and header checksum, no options), UDP to port 4791 (checksum
 * 0, the source port from the flow), ARP for IPv4 over Ethernet; and the receive side's checks
 * down to a RoCEv2 packet whose ICRC matches ({@code rxe_udp_encap_recv}, {@code rxe_rcv}).
 *
 * <p>Sent frames have a fixed layout: Ethernet at 0, IPv4 at {@link #IP}, UDP at {@link #UDP},
 * the BTH at {@link #BTH}. Received ones may carry IPv4 options.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/infiniband/sw/rxe/rxe_net.c">rxe_net.c</a>
 */
public final class RxeNet {

    public static final int ETH_BYTES = 14;
    public static final int IP_BYTES = 20;
    public static final int UDP_BYTES = 8;
    public static final int ARP_BYTES = 28;
    public static final int ETH_P_IP = 0x0800;
    public static final int ETH_P_ARP = 0x0806;
    public static final int ROCE_V2_PORT = 4791;
    /** {@code IB_ROCE_UDP_ENCAP_VALID_PORT_MIN}: source ports are 0xC000..0xFFFF. */
    public static final int SPORT_MIN = 0xC000;
    public static final long BROADCAST = 0xFFFF_FFFF_FFFFL;
    public static final int IP = ETH_BYTES;
    public static final int UDP = IP + IP_BYTES;
    public static final int BTH = UDP + UDP_BYTES;
    /** Bytes a frame adds around the BTH and what follows it: Ethernet, IPv4, UDP and the ICRC. */
    public static final int OVERHEAD = BTH + RxeHdr.ICRC_BYTES;

    /** {@link #parse} results: the frame is RoCE, an ARP packet, or dropped for the named reason. */
    public static final int ROCE = 0, ARP = 1, NOT_MINE = 2, MALFORMED = 3, BAD_ICRC = 4, UNKNOWN_OPCODE = 5, NOT_ROCE = 6;

    private RxeNet() {
    }

    static long mac(MemorySegment f, long off) {
        return (f.get(RxeHdr.BE16, off) & 0xFFFFL) << 32 | f.get(RxeHdr.BE32, off + 2) & 0xFFFF_FFFFL;
    }

    static void mac(MemorySegment f, long off, long mac) {
        f.set(RxeHdr.BE16, off, (short) (mac >>> 32));
        f.set(RxeHdr.BE32, off + 2, (int) mac);
    }

    /** The one's-complement header checksum of {@code len} bytes at {@code off} (RFC 1071). */
    public static int ipChecksum(MemorySegment f, long off, int len) {
        int sum = 0;
        for (int i = 0; i < len; i += 2) {
            sum += f.get(RxeHdr.BE16, off + i) & 0xFFFF;
        }
        sum = (sum & 0xFFFF) + (sum >>> 16);
        sum = (sum & 0xFFFF) + (sum >>> 16);
        return ~sum & 0xFFFF;
    }

    /**
     * The UDP source port of a connected QP's flow ({@code rdma_get_udp_sport} of the flow label
     * {@code rdma_calc_flow_label(lqpn, rqpn)}): the same both ways for a pair of QPs.
     */
    public static int udpSport(int lqpn, int rqpn) {
        long v = (lqpn & 0xFFFFFFL) * (rqpn & 0xFFFFFFL);
        v ^= v >>> 20;
        v ^= v >>> 40;
        int fl = (int) (v & 0xFFFFF);
        int low = fl & 0x3FFF;
        low ^= (fl & 0xFC000) >>> 14;
        return SPORT_MIN | low;
    }

    /** The UDP source port of a QP without a connected peer (UD): {@code RXE_ROCE_V2_SPORT + hash_32(qpn, 14)}. */
    public static int udpSport(int qpn) {
        return SPORT_MIN + ((qpn * 0x61C88647) >>> 18 & 0x3FFF);
    }

    /**
     * Writes Ethernet, IPv4 and UDP headers for a RoCEv2 packet whose BTH, extension headers,
     * payload and pad take {@code l4} bytes (the ICRC excluded), then sets the frame's length;
     * the caller writes the BTH and the rest, then {@link #seal}s it.
     */
    public static void roceHeaders(Frame fr, long dstMac, long srcMac, int srcIp, int dstIp, int ipId, int sport, int l4) {
        MemorySegment f = fr.seg;
        mac(f, 0, dstMac);
        mac(f, 6, srcMac);
        f.set(RxeHdr.BE16, 12, (short) ETH_P_IP);
        int ipLen = IP_BYTES + UDP_BYTES + l4 + RxeHdr.ICRC_BYTES;
        f.set(RxeHdr.BE32, IP, 0x4500_0000 | ipLen);
        f.set(RxeHdr.BE32, IP + 4, ipId << 16 | 0x4000); // DF
        f.set(RxeHdr.BE32, IP + 8, 64 << 24 | 17 << 16); // TTL 64, UDP, checksum 0 for now
        f.set(RxeHdr.BE32, IP + 12, srcIp);
        f.set(RxeHdr.BE32, IP + 16, dstIp);
        f.set(RxeHdr.BE16, IP + 10, (short) ipChecksum(f, IP, IP_BYTES));
        f.set(RxeHdr.BE16, UDP, (short) sport);
        f.set(RxeHdr.BE16, UDP + 2, (short) ROCE_V2_PORT);
        f.set(RxeHdr.BE16, UDP + 4, (short) (UDP_BYTES + l4 + RxeHdr.ICRC_BYTES));
        f.set(RxeHdr.BE16, UDP + 6, (short) 0);
        fr.len = ETH_BYTES + ipLen;
    }

    /** Computes and stores the ICRC of a frame built by {@link #roceHeaders}. */
    public static void seal(Frame fr) {
        RxeIcrc.fill(fr, IP, fr.len - ETH_BYTES);
    }

    /** An ARP request ({@code op} 1) or reply (2) for IPv4 over Ethernet. */
    public static void arp(Frame fr, int op, long dstMac, long srcMac, int srcIp, long targetMac, int targetIp) {
        MemorySegment f = fr.seg;
        mac(f, 0, dstMac);
        mac(f, 6, srcMac);
        f.set(RxeHdr.BE16, 12, (short) ETH_P_ARP);
        f.set(RxeHdr.BE32, 14, 0x0001_0800); // hardware Ethernet, protocol IPv4
        f.set(RxeHdr.BE32, 18, 0x0604_0000 | op); // sizes 6 and 4, operation
        mac(f, 22, srcMac);
        f.set(RxeHdr.BE32, 28, srcIp);
        mac(f, 32, targetMac);
        f.set(RxeHdr.BE32, 38, targetIp);
        fr.len = ETH_BYTES + ARP_BYTES;
    }

    public static int arpOp(Frame fr) {
        return fr.seg.get(RxeHdr.BE16, 20) & 0xFFFF;
    }

    public static long arpSenderMac(Frame fr) {
        return mac(fr.seg, 22);
    }

    public static int arpSenderIp(Frame fr) {
        return fr.seg.get(RxeHdr.BE32, 28);
    }

    public static int arpTargetIp(Frame fr) {
        return fr.seg.get(RxeHdr.BE32, 38);
    }

    /**
     * Classifies a received frame for the port with MAC {@code myMac} and address {@code myIp}
     * and, for a RoCEv2 packet, fills {@code p}: {@link #ROCE} (the ICRC matched, the opcode
     * known, the lengths consistent), {@link #ARP} (a well-formed IPv4 ARP packet), or the reason
     * it is dropped. Never throws on any bytes.
     */
    public static int parse(Frame fr, RxePkt p, long myMac, int myIp) {
        MemorySegment f = fr.seg;
        int len = fr.len;
        if (len < ETH_BYTES || len > Frame.CAPACITY) {
            return MALFORMED;
        }
        p.dstMac = mac(f, 0);
        p.srcMac = mac(f, 6);
        int type = f.get(RxeHdr.BE16, 12) & 0xFFFF;
        if (type == ETH_P_ARP) {
            if (len < ETH_BYTES + ARP_BYTES || f.get(RxeHdr.BE32, 14) != 0x0001_0800 || (f.get(RxeHdr.BE16, 18) & 0xFFFF) != 0x0604) {
                return MALFORMED;
            }
            return p.dstMac == myMac || p.dstMac == BROADCAST ? ARP : NOT_MINE;
        }
        if (type != ETH_P_IP) {
            return NOT_ROCE;
        }
        if (p.dstMac != myMac) {
            return NOT_MINE;
        }
        if (len < ETH_BYTES + IP_BYTES) {
            return MALFORMED;
        }
        int vihl = f.get(ValueLayout.JAVA_BYTE, IP) & 0xFF;
        int ihl = (vihl & 0xF) * 4;
        int ipLen = f.get(RxeHdr.BE16, IP + 2) & 0xFFFF;
        if (vihl >> 4 != 4 || ihl < IP_BYTES || ipLen < ihl + UDP_BYTES || ETH_BYTES + ipLen > len) {
            return MALFORMED;
        }
        if ((f.get(RxeHdr.BE16, IP + 6) & 0x3FFF) != 0 || ipChecksum(f, IP, ihl) != 0) {
            return MALFORMED; // a fragment, or a corrupt header
        }
        if ((f.get(ValueLayout.JAVA_BYTE, IP + 9) & 0xFF) != 17) {
            return NOT_ROCE;
        }
        p.srcIp = f.get(RxeHdr.BE32, IP + 12);
        p.dstIp = f.get(RxeHdr.BE32, IP + 16);
        if (p.dstIp != myIp) {
            return NOT_MINE;
        }
        int udp = IP + ihl;
        if ((f.get(RxeHdr.BE16, udp + 2) & 0xFFFF) != ROCE_V2_PORT) {
            return NOT_ROCE;
        }
        int udpLen = f.get(RxeHdr.BE16, udp + 4) & 0xFFFF;
        if (udpLen != ipLen - ihl || udpLen < UDP_BYTES + RxeHdr.BTH_BYTES + RxeHdr.ICRC_BYTES) {
            return MALFORMED;
        }
        p.ip = IP;
        p.ipLen = ipLen;
        p.sport = f.get(RxeHdr.BE16, udp) & 0xFFFF;
        int bth = udp + UDP_BYTES;
        p.bth = bth;
        if (RxeIcrc.stored(fr, IP, ipLen) != RxeIcrc.compute(fr, IP, ipLen)) {
            return BAD_ICRC;
        }
        p.opcode = RxeHdr.bthOpcode(f, bth);
        p.mask = RxeOpcode.mask(p.opcode);
        if (p.mask == 0) {
            return UNKNOWN_OPCODE;
        }
        int pad = RxeHdr.bthPad(f, bth);
        int end = IP + ipLen - RxeHdr.ICRC_BYTES;
        p.payload = bth + RxeOpcode.length(p.opcode);
        p.payloadLen = end - p.payload - pad;
        if (p.payloadLen < 0 || RxeHdr.bthTver(f, bth) != 0 || (!p.has(RxeOpcode.PAYLOAD) && p.payloadLen != 0)) {
            return MALFORMED;
        }
        p.psn = RxeHdr.bthPsn(f, bth);
        p.qpn = RxeHdr.bthQpn(f, bth);
        p.ackReq = RxeHdr.bthAckReq(f, bth);
        p.se = RxeHdr.bthSe(f, bth);
        p.pkey = RxeHdr.bthPkey(f, bth);
        return ROCE;
    }

    /** Dotted-quad form of an IPv4 address. */
    public static String ipString(int ip) {
        return (ip >>> 24) + "." + (ip >>> 16 & 0xFF) + "." + (ip >>> 8 & 0xFF) + "." + (ip & 0xFF);
    }

    /** Parses a dotted quad; a clear error naming it otherwise. */
    public static int parseIp(String s) {
        String[] p = s.trim().split("\\.");
        if (p.length != 4) {
            throw new IllegalArgumentException("'" + s + "' is not an IPv4 address a.b.c.d");
        }
        int ip = 0;
        for (String b : p) {
            int v;
            try {
                v = Integer.parseInt(b);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("'" + s + "' is not an IPv4 address a.b.c.d");
            }
            if (v < 0 || v > 255) {
                throw new IllegalArgumentException("'" + s + "' is not an IPv4 address: " + v + " is not 0..255");
            }
            ip = ip << 8 | v;
        }
        return ip;
    }

    /** Parses {@code aa:bb:cc:dd:ee:ff}. */
    public static long parseMac(String s) {
        String[] p = s.trim().split(":");
        if (p.length != 6) {
            throw new IllegalArgumentException("'" + s + "' is not a MAC address aa:bb:cc:dd:ee:ff");
        }
        long m = 0;
        for (String b : p) {
            try {
                m = m << 8 | Integer.parseInt(b, 16) & 0xFF;
                if (b.length() != 2) {
                    throw new NumberFormatException();
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("'" + s + "' is not a MAC address aa:bb:cc:dd:ee:ff");
            }
        }
        return m;
    }

    public static String macString(long m) {
        return String.format("%02x:%02x:%02x:%02x:%02x:%02x", m >>> 40 & 0xFF, m >>> 32 & 0xFF, m >>> 24 & 0xFF, m >>> 16 & 0xFF,
                m >>> 8 & 0xFF, m & 0xFF);
    }
}
