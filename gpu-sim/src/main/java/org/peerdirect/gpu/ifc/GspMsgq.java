package org.peerdirect.gpu.ifc;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The command queue and the message queue in memory, in the shape of NVIDIA's GSP message queues
 * ({@code msgq_priv.h}: {@code msgqTxHeader}, {@code msgqRxHeader}; the queue element
 * {@code struct r535_gsp_msg} and the RPC header {@code rpc_message_header_v} /
 * {@code struct nvfw_gsp_rpc} of nouveau's {@code r535} code). Little-endian.
 *
 * <p>Each side writes only its own backing store, both allocated by the driver and mapped for the
 * GPU's DMA: the driver's store holds the command queue's TX header ({@code writePtr}: the next
 * slot the driver fills), the driver's RX header ({@code readPtr}: the next message it will read)
 * and the command elements; the model's store holds the message queue's TX header, the model's RX
 * header (the next command it will consume) and the message elements. A queue is empty when
 * {@code readPtr == writePtr} and full when {@code writePtr + 1 == readPtr} (mod {@code msgCount}).
 *
 * <p>Every element is {@code msgSize} bytes: the element header ({@link #ELEM_HDR_SIZE} bytes;
 * {@code checksum} makes the XOR of the element's 64-bit words, folded to 32 bits, zero), then one
 * RPC header ({@link #RPC_HDR_SIZE} bytes) and its parameters. The model answers each command
 * with a message carrying the same {@code function} and RPC {@code sequence}, its
 * {@code rpc_result} ({@link GpuRpc} {@code RESULT_*}) and reply parameters.
 */
public final class GspMsgq {

    private GspMsgq() {
    }

    // ---- msgqTxHeader, at offset 0 of a backing store
    /** Queue version, {@link #VERSION}. */
    public static final long TX_VERSION = 0x00;
    /** Bytes of the backing store: {@code entryOff + msgSize * msgCount}. */
    public static final long TX_SIZE = 0x04;
    /** Element size: a power of two from {@link #MIN_MSG_SIZE} to {@link #MAX_MSG_SIZE}. */
    public static final long TX_MSG_SIZE = 0x08;
    /** Elements: {@link #MIN_MSG_COUNT} to {@link #MAX_MSG_COUNT}. */
    public static final long TX_MSG_COUNT = 0x0c;
    /** The next slot the writer fills. */
    public static final long TX_WRITE_PTR = 0x10;
    public static final long TX_FLAGS = 0x14;
    /** Where this store's {@code msgqRxHeader} is: 4-byte aligned, after the TX header, before the entries. */
    public static final long TX_RX_HDR_OFF = 0x18;
    /** Where the elements start: 4 KiB aligned, not 0. */
    public static final long TX_ENTRY_OFF = 0x1c;
    public static final int TX_HDR_SIZE = 0x20;
    // ---- msgqRxHeader, at rxHdrOff
    /** The next slot the reader of the other queue will read. */
    public static final long RX_READ_PTR = 0x00;

    public static final int VERSION = 0;
    public static final int MIN_MSG_SIZE = 128;
    public static final int MAX_MSG_SIZE = 4096;
    public static final int MIN_MSG_COUNT = 2;
    public static final int MAX_MSG_COUNT = 1024;

    // ---- the element header (struct r535_gsp_msg)
    public static final long ELEM_AUTH_TAG = 0x00;
    public static final long ELEM_AAD = 0x10;
    public static final long ELEM_CHECKSUM = 0x20;
    public static final long ELEM_SEQUENCE = 0x24;
    /** Elements this message takes: always 1 here (every RPC fits one element). */
    public static final long ELEM_COUNT = 0x28;
    public static final int ELEM_HDR_SIZE = 0x30;

    // ---- the RPC header (rpc_message_header_v), at ELEM_HDR_SIZE
    public static final long RPC_HEADER_VERSION = 0x00;
    public static final long RPC_SIGNATURE = 0x04;
    /** Bytes of the RPC header and its parameters. */
    public static final long RPC_LENGTH = 0x08;
    public static final long RPC_FUNCTION = 0x0c;
    public static final long RPC_RESULT = 0x10;
    /** A detail of the result: the index or value the model refused. */
    public static final long RPC_RESULT_PRIVATE = 0x14;
    public static final long RPC_SEQUENCE = 0x18;
    public static final long RPC_SPARE = 0x1c;
    public static final int RPC_HDR_SIZE = 0x20;
    /** Where an RPC's parameters start in its element. */
    public static final long PARAMS = ELEM_HDR_SIZE + RPC_HDR_SIZE;

    /** {@code header_version} of an RPC. */
    public static final int RPC_HEADER_VERSION_3 = 0x0300_0000;
    /** {@code signature}: the bytes "VRPC" ({@code 'C' << 24 | 'P' << 16 | 'R' << 8 | 'V'}). */
    public static final int RPC_SIGNATURE_VRPC = 'C' << 24 | 'P' << 16 | 'R' << 8 | 'V';

    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    /**
     * The element checksum: the XOR of the element's {@code len} bytes as 64-bit words, its upper
     * and lower halves XORed ({@code r535_gsp_cmdq_push}). Computed with the checksum field zero
     * it is the value to store; over an element with its checksum stored it is 0.
     *
     * @param len a multiple of 8
     */
    public static int checksum(MemorySegment elem, long offset, int len) {
        long x = 0;
        for (int i = 0; i < len; i += 8) {
            x ^= elem.get(LONG, offset + i);
        }
        return (int) (x >>> 32) ^ (int) x;
    }
}
