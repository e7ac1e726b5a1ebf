package org.peerdirect.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HexFormat;

import org.junit.jupiter.api.Test;

/**
 * The test's own RoCEv2 reading, checked without a guest: a frame the guest's rxe sent (an RC
 * SEND_ONLY of ibv_rc_pingpong, 64 bytes of 0x7b, captured by RxeGuestTest) passes the ICRC
 * and IP checksum checks; a flipped payload bit or another IP ID fails the ICRC (both are
 * covered), another TTL or TOS does not (both are masked).
 */
class RoceFramesTest {

    /** Ethernet | IPv4 (ID 0x5851, DF) | UDP 54099 → 4791 | BTH SEND_ONLY to QP 0x000123, PSN 0x505b9f, AckReq | 64 B | ICRC. */
    private static final byte[] RXE_SEND_ONLY = HexFormat.of().parseHex("52540000000152540000000208004500006c585140004011cd670a6300020a630001"
            + "d35312b7005800000400ffff0000012380505b9f" + "7b".repeat(64) + "3e2340ac");

    @Test
    void anRxeFrameDecodesAndPassesTheChecks() {
        RoceFrames.Roce r = RoceFrames.decode(RXE_SEND_ONLY.clone());
        assertNotNull(r);
        assertEquals(0x04, r.opcode());
        assertEquals(0x000123, r.destQp());
        assertEquals(0x505b9f, r.psn());
        assertTrue(r.ackReq());
        assertEquals(64, r.payloadLen());
        assertEquals(0x5851, r.ipId());
        assertTrue(r.df());
        assertTrue(r.icrcOk(), "rxe's own ICRC");
        assertTrue(r.ipChecksumOk());
    }

    @Test
    void coveredFieldsBreakTheIcrcMaskedOnesDoNot() {
        byte[] payload = RXE_SEND_ONLY.clone();
        payload[60] ^= 0x01;
        assertFalse(RoceFrames.decode(payload).icrcOk(), "a flipped payload bit");
        byte[] id = RXE_SEND_ONLY.clone();
        id[19] ^= 0x01; // IP ID: covered (why a kernel UDP socket cannot send rxe-valid frames)
        assertFalse(RoceFrames.decode(id).icrcOk(), "another IP ID");
        byte[] ttl = RXE_SEND_ONLY.clone();
        ttl[22] = 1;
        ttl[15] = 0x10;
        RoceFrames.Roce t = RoceFrames.decode(ttl);
        assertTrue(t.icrcOk(), "TTL and TOS are masked");
        assertFalse(t.ipChecksumOk(), "but the IP header checksum covers them");
        byte[] resv = RXE_SEND_ONLY.clone();
        resv[14 + 20 + 8 + 4] = (byte) 0xc0; // BTH byte 4 (FECN/BECN): masked
        assertTrue(RoceFrames.decode(resv).icrcOk());
    }

    /** The answering MAC this case's expected reply holds (a host end's MAC is the caller's to give). */
    private static final byte[] ASKED_MAC = {0x52, 0x54, 0x00, 0x00, 0x00, 0x01};

    @Test
    void otherFramesAreNotRoce() {
        byte[] arp = RoceFrames.arpReply(HexFormat.of().parseHex("ffffffffffff525400000002080600010800060400015254000000020a6300020000000000000a630001"),
                ASKED_MAC, WireEnd.IP);
        assertNotNull(arp, "a request for 10.99.0.1 is answered");
        assertEquals("525400000002525400000001080600010800060400025254000000010a6300015254000000020a630002", HexFormat.of().formatHex(arp));
        assertNull(RoceFrames.decode(arp));
        assertNull(RoceFrames.arpReply(HexFormat.of().parseHex("ffffffffffff525400000002080600010800060400015254000000020a6300020000000000000a630009"),
                ASKED_MAC, WireEnd.IP), "another address is not ours to answer");
        byte[] truncated = java.util.Arrays.copyOf(RXE_SEND_ONLY, 60);
        assertNull(RoceFrames.decode(truncated), "a frame shorter than its IP length is not decoded");
    }
}
