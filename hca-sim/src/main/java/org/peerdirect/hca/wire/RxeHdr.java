package org.peerdirect.hca.wire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The InfiniBand transport headers as they travel in a RoCEv2 UDP payload ({@code rxe_hdr.h}):
 * offsets and big-endian accessors over a frame segment, each taking the header's own offset.
 * The ICRC is the exception: stored little-endian ({@link RxeIcrc}).
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/infiniband/sw/rxe/rxe_hdr.h">rxe_hdr.h</a>
 */
public final class RxeHdr {

    static final ValueLayout.OfShort BE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    public static final int BTH_BYTES = 12;
    public static final int RETH_BYTES = 16;
    public static final int AETH_BYTES = 4;
    public static final int DETH_BYTES = 8;
    public static final int IMMDT_BYTES = 4;
    public static final int IETH_BYTES = 4;
    public static final int ATMETH_BYTES = 28;
    public static final int ATMACK_BYTES = 8;
    public static final int FETH_BYTES = 4;
    public static final int XRCETH_BYTES = 4;
    public static final int ICRC_BYTES = 4;

    /** {@code BTH_PSN_MASK}, {@code BTH_QPN_MASK}: 24 bits. */
    public static final int PSN_MASK = 0xFFFFFF;
    public static final int QPN_MASK = 0xFFFFFF;
    public static final int DEFAULT_PKEY = 0xFFFF;

    /** AETH syndromes ({@code enum aeth_syndrome}): the type in bits 7:5, the value in 4:0. */
    public static final int AETH_TYPE_MASK = 0xE0;
    public static final int AETH_ACK = 0x00;
    public static final int AETH_RNR_NAK = 0x20;
    public static final int AETH_NAK = 0x60;
    /** An ACK with the credit field "unlimited" (0x1f), what rxe always sends. */
    public static final int AETH_ACK_UNLIMITED = 0x1F;
    public static final int AETH_NAK_PSN_SEQ_ERROR = 0x60;
    public static final int AETH_NAK_INVALID_REQ = 0x61;
    public static final int AETH_NAK_REM_ACC_ERR = 0x62;
    public static final int AETH_NAK_REM_OP_ERR = 0x63;
    public static final int AETH_NAK_INV_RD_REQ = 0x64;

    private RxeHdr() {
    }

    // ------------------------------------------------------------------ BTH (12 bytes)

    public static int bthOpcode(MemorySegment f, long bth) {
        return f.get(ValueLayout.JAVA_BYTE, bth) & 0xFF;
    }

    /** Solicited event, bit 7 of byte 1. */
    public static boolean bthSe(MemorySegment f, long bth) {
        return (f.get(ValueLayout.JAVA_BYTE, bth + 1) & 0x80) != 0;
    }

    /** Pad count, bits 5:4 of byte 1: payload bytes added to reach a multiple of 4. */
    public static int bthPad(MemorySegment f, long bth) {
        return f.get(ValueLayout.JAVA_BYTE, bth + 1) >> 4 & 3;
    }

    /** Transport header version, bits 3:0 of byte 1 (must be 0). */
    public static int bthTver(MemorySegment f, long bth) {
        return f.get(ValueLayout.JAVA_BYTE, bth + 1) & 0xF;
    }

    public static int bthPkey(MemorySegment f, long bth) {
        return f.get(BE16, bth + 2) & 0xFFFF;
    }

    public static int bthQpn(MemorySegment f, long bth) {
        return f.get(BE32, bth + 4) & QPN_MASK;
    }

    public static boolean bthAckReq(MemorySegment f, long bth) {
        return (f.get(ValueLayout.JAVA_BYTE, bth + 8) & 0x80) != 0;
    }

    public static int bthPsn(MemorySegment f, long bth) {
        return f.get(BE32, bth + 8) & PSN_MASK;
    }

    /** Writes a whole BTH: byte 4 (FECN/BECN/resv8a) 0, as rxe sends it; TVer 0. */
    public static void bth(MemorySegment f, long bth, int opcode, boolean se, int pad, int pkey, int qpn, boolean ackReq, int psn) {
        f.set(ValueLayout.JAVA_BYTE, bth, (byte) opcode);
        f.set(ValueLayout.JAVA_BYTE, bth + 1, (byte) ((se ? 0x80 : 0) | (pad & 3) << 4));
        f.set(BE16, bth + 2, (short) pkey);
        f.set(BE32, bth + 4, qpn & QPN_MASK);
        f.set(BE32, bth + 8, (ackReq ? 0x8000_0000 : 0) | psn & PSN_MASK);
    }

    // ------------------------------------------------------------------ RETH (16): VA, R_Key, DMA length

    public static long rethVa(MemorySegment f, long off) {
        return f.get(BE64, off);
    }

    public static int rethRkey(MemorySegment f, long off) {
        return f.get(BE32, off + 8);
    }

    public static long rethLen(MemorySegment f, long off) {
        return f.get(BE32, off + 12) & 0xFFFF_FFFFL;
    }

    public static void reth(MemorySegment f, long off, long va, int rkey, long len) {
        f.set(BE64, off, va);
        f.set(BE32, off + 8, rkey);
        f.set(BE32, off + 12, (int) len);
    }

    // ------------------------------------------------------------------ AETH (4): syndrome, MSN

    public static int aethSyndrome(MemorySegment f, long off) {
        return f.get(ValueLayout.JAVA_BYTE, off) & 0xFF;
    }

    public static int aethMsn(MemorySegment f, long off) {
        return f.get(BE32, off) & 0xFFFFFF;
    }

    public static void aeth(MemorySegment f, long off, int syndrome, int msn) {
        f.set(BE32, off, syndrome << 24 | msn & 0xFFFFFF);
    }

    // ------------------------------------------------------------------ DETH (8): Q_Key, SrcQP

    public static int dethQkey(MemorySegment f, long off) {
        return f.get(BE32, off);
    }

    public static int dethSqp(MemorySegment f, long off) {
        return f.get(BE32, off + 4) & QPN_MASK;
    }

    public static void deth(MemorySegment f, long off, int qkey, int srcQpn) {
        f.set(BE32, off, qkey);
        f.set(BE32, off + 4, srcQpn & QPN_MASK);
    }

    // ------------------------------------------------------------------ ImmDt, IETH (4 each)

    public static int word(MemorySegment f, long off) {
        return f.get(BE32, off);
    }

    public static void word(MemorySegment f, long off, int v) {
        f.set(BE32, off, v);
    }

    // ------------------------------------------------------------------ FETH (4): placement type 3:0, selectivity level 5:4

    /** {@code FETH_PLT_MASK}, {@code FETH_SEL_MASK}, {@code FETH_SEL_SHIFT}: bits 31:6 are reserved (sent 0, ignored). */
    public static final int FETH_PLT_MASK = 0x0F;
    public static final int FETH_SEL_MASK = 0x30;
    public static final int FETH_SEL_SHIFT = 4;

    /** The placement type ({@code feth_plt}): IB_FLUSH_GLOBAL 1, IB_FLUSH_PERSISTENT 2, or both. */
    public static int fethPlt(MemorySegment f, long off) {
        return f.get(BE32, off) & FETH_PLT_MASK;
    }

    /** The selectivity level ({@code feth_sel}): IB_FLUSH_RANGE 0, IB_FLUSH_MR 1. */
    public static int fethSel(MemorySegment f, long off) {
        return (f.get(BE32, off) & FETH_SEL_MASK) >> FETH_SEL_SHIFT;
    }

    /** Writes a FETH as {@code feth_init}: the level and type masked into their fields, the rest 0. */
    public static void feth(MemorySegment f, long off, int type, int level) {
        f.set(BE32, off, level << FETH_SEL_SHIFT & FETH_SEL_MASK | type & FETH_PLT_MASK);
    }

    // ------------------------------------------------------------------ XRCETH (4): the XRC SRQ number, bits 23:0

    /** The XRC SRQ the request names (IBA 9.3.6, {@code ib_pack.h}'s {@code XRCETH}); bits 31:24 are reserved. */
    public static int xrcethSrqn(MemorySegment f, long off) {
        return f.get(BE32, off) & QPN_MASK;
    }

    public static void xrceth(MemorySegment f, long off, int srqn) {
        f.set(BE32, off, srqn & QPN_MASK);
    }

    // ------------------------------------------------------------------ AtomicETH (28): VA, R_Key, swap/add, compare

    public static long atmVa(MemorySegment f, long off) {
        return f.get(BE64, off);
    }

    public static int atmRkey(MemorySegment f, long off) {
        return f.get(BE32, off + 8);
    }

    public static long atmSwapAdd(MemorySegment f, long off) {
        return f.get(BE64, off + 12);
    }

    public static long atmCompare(MemorySegment f, long off) {
        return f.get(BE64, off + 20);
    }

    public static void atomicEth(MemorySegment f, long off, long va, int rkey, long swapAdd, long compare) {
        f.set(BE64, off, va);
        f.set(BE32, off + 8, rkey);
        f.set(BE64, off + 12, swapAdd);
        f.set(BE64, off + 20, compare);
    }

    // ------------------------------------------------------------------ AtomicAckETH (8): original remote data

    public static long atmAckOrig(MemorySegment f, long off) {
        return f.get(BE64, off);
    }

    public static void atomicAckEth(MemorySegment f, long off, long orig) {
        f.set(BE64, off, orig);
    }

    /** 24-bit PSN difference {@code a - b} as a signed value ({@code psn_compare}): negative when a is before b. */
    public static int psnCompare(int a, int b) {
        return (a - b) << 8 >> 8;
    }
}
