package org.peerdirect.hca.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.junit.jupiter.api.Test;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The FLUSH request's FETH ({@code rxe_hdr.h}: placement type bits 3:0, selectivity level bits
 * 5:4, the rest reserved; FETH then RETH after the BTH, {@code rxe_opcode.c}) and the XRC
 * request's XRCETH (IBA 9.3.6 / {@code ib_pack.h}: 4 bytes right after the BTH, the XRC SRQ
 * number in bits 23:0): written, sealed, parsed back; random frames carrying them never throw.
 */
class RxeFethXrcethTest {

    static final long A_MAC = 0x0200_0a63_0001L;
    static final long B_MAC = 0x0200_0a63_0002L;
    static final int A_IP = RxeNet.parseIp("10.99.0.1");
    static final int B_IP = RxeNet.parseIp("10.99.0.2");

    /** A FLUSH from A to B: type {@code plt}, level {@code sel}, the range in its RETH. */
    static Frame flush(int plt, int sel, long va, int rkey, long len) {
        Frame f = new Frame();
        RxeNet.roceHeaders(f, B_MAC, A_MAC, A_IP, B_IP, 7, 0xc000, RxeOpcode.length(RxeOpcode.RC_FLUSH));
        RxeHdr.bth(f.seg, RxeNet.BTH, RxeOpcode.RC_FLUSH, false, 0, RxeHdr.DEFAULT_PKEY, 0x42, true, 0x123456);
        RxeHdr.feth(f.seg, RxeNet.BTH + RxeOpcode.offset(RxeOpcode.RC_FLUSH, RxeOpcode.FETH), plt, sel);
        RxeHdr.reth(f.seg, RxeNet.BTH + RxeOpcode.offset(RxeOpcode.RC_FLUSH, RxeOpcode.RETH), va, rkey, len);
        RxeNet.seal(f);
        return f;
    }

    /** An XRC SEND ONLY from A to B naming XRC SRQ {@code srqn}, with {@code n} payload bytes. */
    static Frame xrcSend(int srqn, int n) {
        int op = RxeOpcode.XRC_BASE + RxeOpcode.RC_SEND_ONLY;
        int pad = -n & 3;
        Frame f = new Frame();
        RxeNet.roceHeaders(f, B_MAC, A_MAC, A_IP, B_IP, 7, 0xc000, RxeOpcode.length(op) + n + pad);
        RxeHdr.bth(f.seg, RxeNet.BTH, op, false, pad, RxeHdr.DEFAULT_PKEY, 0x43, true, 5);
        RxeHdr.xrceth(f.seg, RxeNet.BTH + RxeOpcode.offset(op, RxeOpcode.XRCETH), srqn);
        for (int i = 0; i < n + pad; i++) {
            f.seg.set(ValueLayout.JAVA_BYTE, RxeNet.BTH + RxeOpcode.length(op) + i, (byte) (i < n ? i + 1 : 0));
        }
        RxeNet.seal(f);
        return f;
    }

    @Test
    void fethSitsBeforeRethAndRoundTrips() {
        assertEquals(RxeHdr.BTH_BYTES, RxeOpcode.offset(RxeOpcode.RC_FLUSH, RxeOpcode.FETH));
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.FETH_BYTES + RxeHdr.RETH_BYTES, RxeOpcode.length(RxeOpcode.RC_FLUSH));
        Frame f = flush(2, 1, 0x1122_3344_5566_7788L, 0xabcd, 0x8000_0000L);
        // the FETH word on the wire: level 1 in bits 5:4, type 2 in bits 3:0, big-endian
        assertEquals(0x12, f.seg.get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), RxeNet.BTH + RxeHdr.BTH_BYTES));
        RxePkt p = new RxePkt();
        assertEquals(RxeNet.ROCE, RxeNet.parse(f, p, B_MAC, B_IP));
        assertEquals(RxeOpcode.RC_FLUSH, p.opcode);
        assertTrue(p.has(RxeOpcode.FLUSH) && p.has(RxeOpcode.REQ) && !p.has(RxeOpcode.PAYLOAD));
        assertEquals(0, p.payloadLen);
        assertEquals(2, RxeHdr.fethPlt(f.seg, p.hdr(RxeOpcode.FETH)));
        assertEquals(1, RxeHdr.fethSel(f.seg, p.hdr(RxeOpcode.FETH)));
        assertEquals(0x1122_3344_5566_7788L, RxeHdr.rethVa(f.seg, p.hdr(RxeOpcode.RETH)));
        assertEquals(0xabcd, RxeHdr.rethRkey(f.seg, p.hdr(RxeOpcode.RETH)));
        assertEquals(0x8000_0000L, RxeHdr.rethLen(f.seg, p.hdr(RxeOpcode.RETH)));
    }

    @Test
    void fethMasksItsFieldsAndIgnoresTheReservedBits() {
        MemorySegment s = MemorySegment.ofArray(new byte[4]);
        RxeHdr.feth(s, 0, 0xff, 0xff); // feth_init masks: type 4 bits, level 2 bits
        assertEquals(0x3f, RxeHdr.word(s, 0));
        RxeHdr.word(s, 0, 0xffff_ffc3); // reserved bits set by a sender: ignored on receipt
        assertEquals(3, RxeHdr.fethPlt(s, 0));
        assertEquals(0, RxeHdr.fethSel(s, 0));
    }

    @Test
    void xrcethFollowsTheBthAndRoundTrips() {
        int send = RxeOpcode.XRC_BASE + RxeOpcode.RC_SEND_ONLY;
        assertEquals(0xa4, send);
        assertEquals(RxeHdr.BTH_BYTES, RxeOpcode.offset(send, RxeOpcode.XRCETH));
        int write = RxeOpcode.XRC_BASE + RxeOpcode.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE;
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.XRCETH_BYTES, RxeOpcode.offset(write, RxeOpcode.RETH));
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.XRCETH_BYTES + RxeHdr.RETH_BYTES, RxeOpcode.offset(write, RxeOpcode.IMMDT));
        int cas = RxeOpcode.XRC_BASE + RxeOpcode.RC_COMPARE_SWAP;
        assertEquals(RxeHdr.BTH_BYTES + RxeHdr.XRCETH_BYTES, RxeOpcode.offset(cas, RxeOpcode.ATMETH));
        // responses carry no XRCETH (IB_OPCODE_XRC_ACKNOWLEDGE is BTH + AETH)
        assertEquals(-1, RxeOpcode.offset(RxeOpcode.XRC_BASE + RxeOpcode.RC_ACKNOWLEDGE, RxeOpcode.XRCETH));
        assertEquals(RxeOpcode.RC_ACKNOWLEDGE, RxeOpcode.rcOf(RxeOpcode.XRC_BASE + RxeOpcode.RC_ACKNOWLEDGE));
        assertEquals(RxeOpcode.RC_FLUSH, RxeOpcode.rcOf(RxeOpcode.RC_FLUSH));
        assertEquals(5, RxeOpcode.transport(send));

        Frame f = xrcSend(0xfe_dcba, 61);
        RxePkt p = new RxePkt();
        assertEquals(RxeNet.ROCE, RxeNet.parse(f, p, B_MAC, B_IP));
        assertEquals(send, p.opcode);
        assertEquals(0xfe_dcba, RxeHdr.xrcethSrqn(f.seg, p.hdr(RxeOpcode.XRCETH)));
        assertEquals(61, p.payloadLen);
        assertEquals(RxeNet.BTH + RxeHdr.BTH_BYTES + RxeHdr.XRCETH_BYTES, p.payload);
        assertEquals(1, f.seg.get(ValueLayout.JAVA_BYTE, p.payload));
        // bits 31:24 are reserved: the SRQ number is the low 24 bits
        RxeHdr.word(f.seg, p.hdr(RxeOpcode.XRCETH), 0x7f00_0009);
        assertEquals(9, RxeHdr.xrcethSrqn(f.seg, p.hdr(RxeOpcode.XRCETH)));
    }

    /** Random bytes after a FLUSH's or an XRC SEND's headers (or inside them): classified, never thrown on. */
    @Property(tries = 1500)
    void randomFramesWithThemNeverThrow(@ForAll @Size(max = 1600) byte[] bytes, @ForAll @IntRange(min = 0, max = 3) int shape) {
        Frame g = shape < 2 ? flush(shape + 1, shape, 0x1000, 5, 4096) : xrcSend(3, 100);
        Frame f = new Frame();
        f.copyFrom(g);
        int keep = Math.min(g.len, shape % 2 == 0 ? RxeNet.BTH + 2 : RxeNet.BTH + RxeHdr.BTH_BYTES + 2);
        int n = Math.min(bytes.length, Frame.CAPACITY - keep);
        MemorySegment.copy(bytes, 0, f.seg, ValueLayout.JAVA_BYTE, keep, n);
        f.len = keep + n;
        RxePkt p = new RxePkt();
        int r = RxeNet.parse(f, p, B_MAC, B_IP);
        assertTrue(r >= RxeNet.ROCE && r <= RxeNet.NOT_ROCE);
        if (r == RxeNet.ROCE && p.has(RxeOpcode.FETH)) {
            assertTrue(RxeHdr.fethPlt(f.seg, p.hdr(RxeOpcode.FETH)) <= 15 && RxeHdr.fethSel(f.seg, p.hdr(RxeOpcode.FETH)) <= 3);
        }
        if (r == RxeNet.ROCE && p.has(RxeOpcode.XRCETH)) {
            assertTrue(RxeHdr.xrcethSrqn(f.seg, p.hdr(RxeOpcode.XRCETH)) <= RxeHdr.QPN_MASK);
        }
    }
}
