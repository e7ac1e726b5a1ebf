package org.peerdirect.hca.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;
import java.util.zip.CRC32;

import org.junit.jupiter.api.Test;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The codec against vectors computed outside it: the frames below were built and their ICRCs
 * computed by {@code ROCE_WIRE.md}'s Appendix B/C recipe (Python, zlib) for the addresses of
 * topology B (10.99.0.1 → 10.99.0.2, MACs 52:54:00:00:00:01/02); the seed and the UDP source
 * port are the document's observations. Random bytes are classified, never thrown on.
 */
class RxeCodecTest {

    static final long MY_MAC = 0x5254_0000_0001L;
    static final long GUEST_MAC = 0x5254_0000_0002L;
    static final int MY_IP = RxeNet.parseIp("10.99.0.1");
    static final int GUEST_IP = RxeNet.parseIp("10.99.0.2");

    /** SEND_ONLY, dest QP 0x11, PSN 0x597a21, AckReq, 61 bytes 0..60 (pad 3), IP ID 0x1234, sport 0xc121. */
    static final String SEND_ONLY = "52540000000252540000000108004500006c12344000401113850a6300010a630002c12112b7005800000430ffff0000001180597a21"
            + "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c000000"
            + "aec64663";
    /** ACKNOWLEDGE with AETH 0x60000000 (NAK: PSN sequence error), PSN 0x3000, as rxe answered in the document's negative probe. */
    static final String NAK_SEQ = "52540000000252540000000108004500003012344000401113c10a6300010a630002c12112b7001c00001100ffff0000001100003000"
            + "600000004f3d3f1a";

    static Frame frame(String hex) {
        Frame f = new Frame();
        byte[] b = HexFormat.of().parseHex(hex);
        MemorySegment.copy(b, 0, f.seg, ValueLayout.JAVA_BYTE, 0, b.length);
        f.len = b.length;
        return f;
    }

    @Test
    void theLrhPlaceholderIsRxesSeed() {
        // rxe_icrc.c seeds its CRC with 0xdebb20e3, "the CRC of 8 bytes of 0xFF" before the final XOR
        CRC32 c = new CRC32();
        c.update(new byte[] {-1, -1, -1, -1, -1, -1, -1, -1});
        assertEquals(0xdebb20e3L, c.getValue() ^ 0xFFFF_FFFFL);
    }

    @Test
    void theIcrcMatchesTheRecipeOfTheDocument() {
        Frame f = frame(SEND_ONLY);
        assertEquals(0x6346c6ae, RxeIcrc.compute(f, RxeNet.IP, f.len - RxeNet.ETH_BYTES));
        assertEquals(0x6346c6ae, RxeIcrc.stored(f, RxeNet.IP, f.len - RxeNet.ETH_BYTES));
        Frame n = frame(NAK_SEQ);
        assertEquals(0x1a3f3d4f, RxeIcrc.compute(n, RxeNet.IP, n.len - RxeNet.ETH_BYTES));
    }

    @Test
    void theMaskedFieldsDoNotChangeTheIcrcTheIpIdDoes() {
        Frame f = frame(SEND_ONLY);
        int ipLen = f.len - RxeNet.ETH_BYTES;
        int before = RxeIcrc.compute(f, RxeNet.IP, ipLen);
        f.seg.set(ValueLayout.JAVA_BYTE, RxeNet.IP + 1, (byte) 0x20); // TOS
        f.seg.set(ValueLayout.JAVA_BYTE, RxeNet.IP + 8, (byte) 3); // TTL
        f.seg.set(ValueLayout.JAVA_BYTE, RxeNet.BTH + 4, (byte) 0xC0); // FECN/BECN
        assertEquals(before, RxeIcrc.compute(f, RxeNet.IP, ipLen));
        f.seg.set(ValueLayout.JAVA_BYTE, RxeNet.IP + 5, (byte) 0x35); // the IP ID is covered
        assertNotEquals(before, RxeIcrc.compute(f, RxeNet.IP, ipLen));
    }

    @Test
    void theBuilderMakesTheSameBytes() {
        Frame f = new Frame();
        byte[] payload = new byte[61];
        for (int i = 0; i < payload.length; i++) {
            payload[i] = (byte) i;
        }
        int l4 = RxeHdr.BTH_BYTES + 64;
        RxeNet.roceHeaders(f, GUEST_MAC, MY_MAC, MY_IP, GUEST_IP, 0x1234, 0xc121, l4);
        RxeHdr.bth(f.seg, RxeNet.BTH, RxeOpcode.RC_SEND_ONLY, false, 3, RxeHdr.DEFAULT_PKEY, 0x11, true, 0x597a21);
        MemorySegment.copy(payload, 0, f.seg, ValueLayout.JAVA_BYTE, RxeNet.BTH + RxeHdr.BTH_BYTES, 61);
        f.seg.asSlice(RxeNet.BTH + RxeHdr.BTH_BYTES + 61, 3).fill((byte) 0);
        RxeNet.seal(f);
        assertEquals(SEND_ONLY, HexFormat.of().formatHex(f.seg.asSlice(0, f.len).toArray(ValueLayout.JAVA_BYTE)));
    }

    @Test
    void parseReadsTheHeadersBack() {
        RxePkt p = new RxePkt();
        // the guest's side: it receives what 10.99.0.1 sent
        assertEquals(RxeNet.ROCE, RxeNet.parse(frame(SEND_ONLY), p, GUEST_MAC, GUEST_IP));
        assertEquals(RxeOpcode.RC_SEND_ONLY, p.opcode);
        assertEquals(0x11, p.qpn);
        assertEquals(0x597a21, p.psn);
        assertTrue(p.ackReq);
        assertEquals(61, p.payloadLen);
        assertEquals(MY_IP, p.srcIp);
        assertEquals(0xc121, p.sport);
        assertEquals(RxeNet.ROCE, RxeNet.parse(frame(NAK_SEQ), p, GUEST_MAC, GUEST_IP));
        assertEquals(RxeHdr.AETH_NAK_PSN_SEQ_ERROR, RxeHdr.aethSyndrome(frame(NAK_SEQ).seg, p.hdr(RxeOpcode.AETH)));
        assertEquals(0x3000, p.psn);
    }

    @Test
    void aFlippedBitIsABadIcrcAWrongAddressIsNotMine() {
        RxePkt p = new RxePkt();
        Frame f = frame(SEND_ONLY);
        f.seg.set(ValueLayout.JAVA_BYTE, RxeNet.BTH + 20, (byte) (f.seg.get(ValueLayout.JAVA_BYTE, RxeNet.BTH + 20) ^ 1));
        assertEquals(RxeNet.BAD_ICRC, RxeNet.parse(f, p, GUEST_MAC, GUEST_IP));
        assertEquals(RxeNet.NOT_MINE, RxeNet.parse(frame(SEND_ONLY), p, MY_MAC, GUEST_IP));
        assertEquals(RxeNet.NOT_MINE, RxeNet.parse(frame(SEND_ONLY), p, GUEST_MAC, MY_IP));
        Frame t = frame(SEND_ONLY);
        t.len -= 10; // truncated: the IP length says more than arrived
        assertEquals(RxeNet.MALFORMED, RxeNet.parse(t, p, GUEST_MAC, GUEST_IP));
    }

    @Test
    void anUnknownOpcodeWithAGoodIcrcIsUnknown() {
        Frame f = frame(SEND_ONLY);
        f.seg.set(ValueLayout.JAVA_BYTE, RxeNet.BTH, (byte) 0x1f); // no such RC opcode
        RxeNet.seal(f);
        assertEquals(RxeNet.UNKNOWN_OPCODE, RxeNet.parse(f, new RxePkt(), GUEST_MAC, GUEST_IP));
    }

    @Test
    void theUdpSourcePortIsRxes() {
        // observed: 49441 for QPN 0x11 talking to QPN 0x11 on both guests
        assertEquals(49441, RxeNet.udpSport(0x11, 0x11));
        assertEquals(RxeNet.udpSport(0x12, 0x34), RxeNet.udpSport(0x34, 0x12));
        for (int q = 1; q < 5000; q += 37) {
            int s = RxeNet.udpSport(q);
            assertTrue(s >= 0xC000 && s <= 0xFFFF, "sport " + s);
        }
    }

    @Test
    void theOpcodeTableIsRxes() {
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.RETH_BYTES + RxeHdr.IMMDT_BYTES, RxeOpcode.length(RxeOpcode.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE));
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.RETH_BYTES, RxeOpcode.offset(RxeOpcode.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, RxeOpcode.IMMDT));
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.AETH_BYTES + RxeHdr.ATMACK_BYTES, RxeOpcode.length(RxeOpcode.RC_ATOMIC_ACKNOWLEDGE));
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.ATMETH_BYTES, RxeOpcode.length(RxeOpcode.RC_FETCH_ADD));
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.DETH_BYTES + RxeHdr.IMMDT_BYTES, RxeOpcode.length(RxeOpcode.UD_SEND_ONLY_WITH_IMMEDIATE));
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.FETH_BYTES, RxeOpcode.offset(RxeOpcode.RC_FLUSH, RxeOpcode.RETH));
        assertEquals(-1, RxeOpcode.offset(RxeOpcode.RC_SEND_ONLY, RxeOpcode.RETH));
        // the opcodes seen on the document's wire are all known
        for (int op : new int[] {0, 1, 2, 4, 6, 7, 8, 10, 12, 16, 17, 100}) {
            assertTrue(RxeOpcode.known(op), RxeOpcode.name(op));
        }
        assertFalse(RxeOpcode.known(0x15));
        assertFalse(RxeOpcode.known(0x40)); // RD: rxe has no RD
        assertEquals(3, RxeOpcode.transport(RxeOpcode.UD_SEND_ONLY));
    }

    @Test
    void psnArithmeticWraps() {
        assertTrue(RxeHdr.psnCompare(0x000001, 0xFFFFFF) > 0);
        assertTrue(RxeHdr.psnCompare(0xFFFFFF, 0x000001) < 0);
        assertEquals(0, RxeHdr.psnCompare(5, 5));
    }

    @Test
    void arpRoundTrips() {
        Frame f = new Frame();
        RxeNet.arp(f, 1, RxeNet.BROADCAST, MY_MAC, MY_IP, 0, GUEST_IP);
        RxePkt p = new RxePkt();
        assertEquals(RxeNet.ARP, RxeNet.parse(f, p, GUEST_MAC, GUEST_IP));
        assertEquals(1, RxeNet.arpOp(f));
        assertEquals(MY_MAC, RxeNet.arpSenderMac(f));
        assertEquals(MY_IP, RxeNet.arpSenderIp(f));
        assertEquals(GUEST_IP, RxeNet.arpTargetIp(f));
    }

    @Test
    void badAddressesAreNamed() {
        assertThrows(IllegalArgumentException.class, () -> RxeNet.parseIp("10.99.0"));
        assertThrows(IllegalArgumentException.class, () -> RxeNet.parseIp("10.99.0.256"));
        assertThrows(IllegalArgumentException.class, () -> RxeNet.parseMac("52:54:00:00:01"));
        assertEquals("52:54:00:00:00:01", RxeNet.macString(RxeNet.parseMac("52:54:00:00:00:01")));
        assertThrows(IllegalArgumentException.class, () -> UdpTunnelLink.address("local", "127.0.0.1"));
    }

    /** Random frames: classified (mostly dropped), never thrown on. */
    @Property(tries = 2000)
    void randomBytesNeverThrow(@ForAll @Size(max = 1600) byte[] bytes, @ForAll @IntRange(min = 0, max = 3) int shape) {
        Frame f = new Frame();
        if (shape > 0 && bytes.length > 0) {
            // a real frame's headers with random bytes from some point on: reaches the deeper checks
            Frame g = frame(shape == 1 ? SEND_ONLY : NAK_SEQ);
            int keep = Math.min(g.len, shape == 3 ? RxeNet.BTH + 1 : RxeNet.UDP);
            f.copyFrom(g);
            int n = Math.min(bytes.length, Frame.CAPACITY - keep);
            MemorySegment.copy(bytes, 0, f.seg, ValueLayout.JAVA_BYTE, keep, n);
            f.len = keep + n;
        } else {
            MemorySegment.copy(bytes, 0, f.seg, ValueLayout.JAVA_BYTE, 0, bytes.length);
            f.len = bytes.length;
        }
        int r = RxeNet.parse(f, new RxePkt(), GUEST_MAC, GUEST_IP);
        assertTrue(r >= RxeNet.ROCE && r <= RxeNet.NOT_ROCE);
    }
}
