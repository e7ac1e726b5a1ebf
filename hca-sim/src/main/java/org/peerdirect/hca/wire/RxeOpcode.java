package org.peerdirect.hca.wire;

/**
 * The opcode table ({@code rxe_opcode.c}'s {@code rxe_opcode[]}): for each BTH opcode its name,
 * its mask of header and role bits, and the bytes of BTH plus extension headers; the extension
 * headers' offsets follow from the mask in the fixed IBA order (XRCETH, DETH/RETH, AtomicETH,
 * AETH, AtomicAckETH, ImmDt, IETH; FLUSH carries FETH then RETH). An opcode with no entry is
 * unknown: the packet is dropped and counted.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/infiniband/sw/rxe/rxe_opcode.c">rxe_opcode.c</a>
 */
public final class RxeOpcode {

    // header bits (enum rxe_hdr_mask)
    public static final int LRH = 1, GRH = 1 << 1, BTH = 1 << 2, RETH = 1 << 3, AETH = 1 << 4, DETH = 1 << 5, IMMDT = 1 << 6,
            IETH = 1 << 7, ATMETH = 1 << 8, ATMACK = 1 << 9, FETH = 1 << 10, XRCETH = 1 << 11;
    // role bits
    public static final int PAYLOAD = 1 << 12, REQ = 1 << 13, ACK = 1 << 14, SEND = 1 << 15, WRITE = 1 << 16, READ = 1 << 17,
            ATOMIC = 1 << 18, RWR = 1 << 19, COMP = 1 << 20, START = 1 << 21, MIDDLE = 1 << 22, END = 1 << 23, FLUSH = 1 << 24,
            ATOMIC_WRITE = 1 << 25;

    // IB_OPCODE_RC_*; UC is 0x20 + the same operation, UD 0x60 + it, XRC 0xA0 + it
    public static final int RC_SEND_FIRST = 0x00, RC_SEND_MIDDLE = 0x01, RC_SEND_LAST = 0x02, RC_SEND_LAST_WITH_IMMEDIATE = 0x03,
            RC_SEND_ONLY = 0x04, RC_SEND_ONLY_WITH_IMMEDIATE = 0x05, RC_RDMA_WRITE_FIRST = 0x06, RC_RDMA_WRITE_MIDDLE = 0x07,
            RC_RDMA_WRITE_LAST = 0x08, RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09, RC_RDMA_WRITE_ONLY = 0x0a,
            RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0b, RC_RDMA_READ_REQUEST = 0x0c, RC_RDMA_READ_RESPONSE_FIRST = 0x0d,
            RC_RDMA_READ_RESPONSE_MIDDLE = 0x0e, RC_RDMA_READ_RESPONSE_LAST = 0x0f, RC_RDMA_READ_RESPONSE_ONLY = 0x10,
            RC_ACKNOWLEDGE = 0x11, RC_ATOMIC_ACKNOWLEDGE = 0x12, RC_COMPARE_SWAP = 0x13, RC_FETCH_ADD = 0x14,
            RC_SEND_LAST_WITH_INVALIDATE = 0x16, RC_SEND_ONLY_WITH_INVALIDATE = 0x17, RC_FLUSH = 0x1c, RC_ATOMIC_WRITE = 0x1d;
    /** {@code IB_OPCODE_XRC}: the XRC block starts here; an XRC opcode is this plus the RC one. */
    public static final int XRC_BASE = 0xa0;
    public static final int UD_SEND_ONLY = 0x64, UD_SEND_ONLY_WITH_IMMEDIATE = 0x65;

    private static final String[] NAME = new String[256];
    private static final int[] MASK = new int[256];
    private static final int[] LENGTH = new int[256];

    private static void op(int code, String name, int mask) {
        NAME[code] = name;
        MASK[code] = mask | BTH;
        LENGTH[code] = RxeHdr.BTH_BYTES + ((mask & XRCETH) != 0 ? RxeHdr.XRCETH_BYTES : 0) + ((mask & DETH) != 0 ? RxeHdr.DETH_BYTES : 0)
                + ((mask & RETH) != 0 ? RxeHdr.RETH_BYTES : 0) + ((mask & ATMETH) != 0 ? RxeHdr.ATMETH_BYTES : 0)
                + ((mask & AETH) != 0 ? RxeHdr.AETH_BYTES : 0) + ((mask & ATMACK) != 0 ? RxeHdr.ATMACK_BYTES : 0)
                + ((mask & IMMDT) != 0 ? RxeHdr.IMMDT_BYTES : 0) + ((mask & IETH) != 0 ? RxeHdr.IETH_BYTES : 0)
                + ((mask & FETH) != 0 ? RxeHdr.FETH_BYTES : 0);
    }

    /** The SEND and WRITE opcodes of a connected transport at {@code base} (RC 0x00, UC 0x20, XRC 0xA0 with its XRCETH). */
    private static void sendWrite(int base, String t, int x) {
        op(base, t + "_SEND_FIRST", x | PAYLOAD | REQ | RWR | SEND | START);
        op(base + 1, t + "_SEND_MIDDLE", x | PAYLOAD | REQ | SEND | MIDDLE);
        op(base + 2, t + "_SEND_LAST", x | PAYLOAD | REQ | COMP | SEND | END);
        op(base + 3, t + "_SEND_LAST_WITH_IMMEDIATE", x | IMMDT | PAYLOAD | REQ | COMP | SEND | END);
        op(base + 4, t + "_SEND_ONLY", x | PAYLOAD | REQ | COMP | RWR | SEND | START | END);
        op(base + 5, t + "_SEND_ONLY_WITH_IMMEDIATE", x | IMMDT | PAYLOAD | REQ | COMP | RWR | SEND | START | END);
        op(base + 6, t + "_RDMA_WRITE_FIRST", x | RETH | PAYLOAD | REQ | WRITE | START);
        op(base + 7, t + "_RDMA_WRITE_MIDDLE", x | PAYLOAD | REQ | WRITE | MIDDLE);
        op(base + 8, t + "_RDMA_WRITE_LAST", x | PAYLOAD | REQ | WRITE | END);
        op(base + 9, t + "_RDMA_WRITE_LAST_WITH_IMMEDIATE", x | IMMDT | PAYLOAD | REQ | WRITE | COMP | RWR | END);
        op(base + 10, t + "_RDMA_WRITE_ONLY", x | RETH | PAYLOAD | REQ | WRITE | START | END);
        op(base + 11, t + "_RDMA_WRITE_ONLY_WITH_IMMEDIATE", x | RETH | IMMDT | PAYLOAD | REQ | WRITE | COMP | RWR | START | END);
    }

    /** The RC-only operations of a reliable transport at {@code base} (RC 0x00, XRC 0xA0). */
    private static void reliable(int base, String t, int x) {
        op(base + 0x0c, t + "_RDMA_READ_REQUEST", x | RETH | REQ | READ | START | END);
        op(base + 0x0d, t + "_RDMA_READ_RESPONSE_FIRST", AETH | PAYLOAD | ACK | START);
        op(base + 0x0e, t + "_RDMA_READ_RESPONSE_MIDDLE", PAYLOAD | ACK | MIDDLE);
        op(base + 0x0f, t + "_RDMA_READ_RESPONSE_LAST", AETH | PAYLOAD | ACK | END);
        op(base + 0x10, t + "_RDMA_READ_RESPONSE_ONLY", AETH | PAYLOAD | ACK | START | END);
        op(base + 0x11, t + "_ACKNOWLEDGE", AETH | ACK | START | END);
        op(base + 0x12, t + "_ATOMIC_ACKNOWLEDGE", AETH | ATMACK | ACK | START | END);
        op(base + 0x13, t + "_COMPARE_SWAP", x | ATMETH | REQ | ATOMIC | START | END);
        op(base + 0x14, t + "_FETCH_ADD", x | ATMETH | REQ | ATOMIC | START | END);
        op(base + 0x16, t + "_SEND_LAST_WITH_INVALIDATE", x | IETH | PAYLOAD | REQ | COMP | SEND | END);
        op(base + 0x17, t + "_SEND_ONLY_WITH_INVALIDATE", x | IETH | PAYLOAD | REQ | COMP | RWR | SEND | START | END);
    }

    static {
        sendWrite(0x00, "IB_OPCODE_RC", 0);
        reliable(0x00, "IB_OPCODE_RC", 0);
        op(RC_FLUSH, "IB_OPCODE_RC_FLUSH", FETH | RETH | REQ | FLUSH | START | END);
        op(RC_ATOMIC_WRITE, "IB_OPCODE_RC_ATOMIC_WRITE", RETH | PAYLOAD | REQ | ATOMIC_WRITE | START | END);
        sendWrite(0x20, "IB_OPCODE_UC", 0);
        op(UD_SEND_ONLY, "IB_OPCODE_UD_SEND_ONLY", DETH | PAYLOAD | REQ | COMP | RWR | SEND | START | END);
        op(UD_SEND_ONLY_WITH_IMMEDIATE, "IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE",
                DETH | IMMDT | PAYLOAD | REQ | COMP | RWR | SEND | START | END);
        sendWrite(0xa0, "IB_OPCODE_XRC", XRCETH);
        reliable(0xa0, "IB_OPCODE_XRC", XRCETH);
    }

    /** The extension headers in the order they follow the BTH, and their sizes. */
    private static final int[] ORDER = {XRCETH, DETH, FETH, RETH, ATMETH, AETH, ATMACK, IMMDT, IETH};
    private static final int[] BYTES = {RxeHdr.XRCETH_BYTES, RxeHdr.DETH_BYTES, RxeHdr.FETH_BYTES, RxeHdr.RETH_BYTES,
            RxeHdr.ATMETH_BYTES, RxeHdr.AETH_BYTES, RxeHdr.ATMACK_BYTES, RxeHdr.IMMDT_BYTES, RxeHdr.IETH_BYTES};

    private RxeOpcode() {
    }

    /** True when the table has the opcode. */
    public static boolean known(int opcode) {
        return opcode >= 0 && opcode < 256 && NAME[opcode] != null;
    }

    public static String name(int opcode) {
        return known(opcode) ? NAME[opcode] : String.format("unknown opcode 0x%02x", opcode);
    }

    /** The opcode's mask, 0 when unknown. */
    public static int mask(int opcode) {
        return opcode >= 0 && opcode < 256 ? MASK[opcode] : 0;
    }

    /** BTH plus extension headers, in bytes; 0 when unknown. */
    public static int length(int opcode) {
        return opcode >= 0 && opcode < 256 ? LENGTH[opcode] : 0;
    }

    /** Transport bits 7:5 ({@code IB_OPCODE_RC} 0, UC 1, UD 3, XRC 5). */
    public static int transport(int opcode) {
        return opcode >> 5 & 7;
    }

    /** The RC opcode of the same operation: an XRC opcode less {@link #XRC_BASE}; others as they are. */
    public static int rcOf(int opcode) {
        return transport(opcode) == XRC_BASE >> 5 ? opcode - XRC_BASE : opcode;
    }

    /**
     * Offset of extension header {@code hdr} (one of the header bits) from the BTH, -1 when the
     * opcode lacks it ({@code rxe_opcode[].offset[]}).
     */
    public static int offset(int opcode, int hdr) {
        int m = mask(opcode);
        if ((m & hdr) == 0) {
            return -1;
        }
        int off = RxeHdr.BTH_BYTES;
        for (int i = 0; i < ORDER.length; i++) {
            if (ORDER[i] == hdr) {
                return off;
            }
            if ((m & ORDER[i]) != 0) {
                off += BYTES[i];
            }
        }
        return -1;
    }
}
