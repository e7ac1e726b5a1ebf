package org.peerdirect.hca.wire;

/**
 * What the receive path learned of one frame ({@code struct rxe_pkt_info}): addresses, the BTH
 * fields, the opcode's mask, where the payload is. Filled by {@link RxeNet#parse}; one per
 * receiving thread, reused.
 */
public final class RxePkt {
    public long srcMac;
    public long dstMac;
    public int srcIp;
    public int dstIp;
    public int sport;
    /** Offsets in the frame: the IPv4 header, the BTH. */
    public int ip;
    public int bth;
    /** The IP total length. */
    public int ipLen;
    public int opcode;
    public int mask;
    public int psn;
    public int qpn;
    public boolean ackReq;
    public boolean se;
    public int pkey;
    /** Payload offset in the frame and bytes (without the pad). */
    public int payload;
    public int payloadLen;

    /** Offset in the frame of extension header {@code hdr} ({@link RxeOpcode} bits); the opcode has it. */
    public int hdr(int hdr) {
        return bth + RxeOpcode.offset(opcode, hdr);
    }

    public boolean has(int bits) {
        return (mask & bits) != 0;
    }
}
