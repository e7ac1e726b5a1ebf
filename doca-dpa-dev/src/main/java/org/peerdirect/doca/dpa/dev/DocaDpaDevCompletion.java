package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code doca_dpa_dev.h}'s completion calls: {@code doca_dpa_dev_get_completion}, the element
 * getters, {@code doca_dpa_dev_completion_ack} and {@code doca_dpa_dev_completion_request_notification}.
 *
 * <p>[model] DOCA does not publish what a {@code doca_dpa_dev_completion_t} is. Here it is the DPA
 * address of the completion context's descriptor, written by the host library
 * ({@code doca_dpa_completion_start}), little-endian: the CQ ring {@link #OFF_RING}, its doorbell
 * record {@link #OFF_DBR}, the element array {@link #OFF_ELEMS}, the CQ number {@link #OFF_CQN},
 * log2 of its depth {@link #OFF_LOG}, the outbox the calls ring through {@link #OFF_OUTBOX}, the
 * index of the next CQE to read {@link #OFF_CI}, the acknowledged index {@link #OFF_ACKED}, and a
 * table of {@link #MAX_QPS} (QP number, user data) pairs from {@link #OFF_TABLE} that DOCA contexts
 * attached to the completion fill ({@code doca_rdma_dpa_completion_attach}: a connection's QP and
 * its connection id). Underneath is a FlexIO CQ whose element is the attached thread, or, for a
 * context started with no thread (DOCA's manual polling), a CQ no thread is bound to: a kernel
 * or thread reads it with {@link #getCompletion} and nothing is triggered.
 *
 * <p>A {@code doca_dpa_dev_completion_element_t} is the DPA address of the element
 * {@link #getCompletion} decoded from its CQE into the element array (slot {@code ci mod depth}):
 * it stays valid until the element is acknowledged, as DOCA's does. Element layout
 * ({@link #ELEM_SIZE} bytes): type u8, swqe opcode u8, error syndrome u8, vendor syndrome u8,
 * immediate u32, user data u32, QP number u32, WQE counter u32, bytes u32, timestamp u64.
 *
 * <p>Not thread-safe, as DOCA documents ("All DOCA DPA objects are non-thread-safe"): one thread
 * uses a completion context at a time. {@link #getCompletion}, {@link #completionAck} and
 * {@link #completionRequestNotification} tell the checker they are inside the context
 * ({@code Dpa.objectEnter}/{@code objectLeave} on its handle), so two harts in it at once are C8.
 * The element getters read an element, not the context, and are not marked. A call that ends the
 * process does not leave (the silicon lets go of what an ended activation held).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_dev_get_completion, doca_dpa_dev_completion_ack, doca_dpa_dev_completion_request_notification</a>
 */
public final class DocaDpaDevCompletion {

    public static final int OFF_RING = 0;
    public static final int OFF_DBR = 8;
    public static final int OFF_ELEMS = 16;
    public static final int OFF_CQN = 24;
    public static final int OFF_LOG = 28;
    public static final int OFF_OUTBOX = 32;
    public static final int OFF_CI = 36;
    public static final int OFF_ACKED = 40;
    public static final int OFF_NQPS = 44;
    public static final int OFF_TABLE = 64;
    /** QPs a completion context can serve (the table's entries). */
    public static final int MAX_QPS = 32;
    /**
     * A second table, entry {@code i} for the QP of entry {@code i} of {@link #OFF_TABLE}: the DPA
     * address (u64, 0 for none) where {@link #getCompletion} stores the QP's send index after the
     * completion it hands out (its WQE counter + 1): async ops count their outstanding copies by it
     * ({@link DocaDpaDevAsyncOps#OFF_SQ_CI}).
     */
    public static final int OFF_CI_TABLE = OFF_TABLE + 8 * MAX_QPS;
    /** Bytes of a completion context's descriptor. */
    public static final int DESC_SIZE = OFF_CI_TABLE + 8 * MAX_QPS;
    /** Bytes of a decoded completion element. */
    public static final int ELEM_SIZE = 32;

    /** {@code doca_dpa_dev_completion_type_t}: the CQE opcodes. */
    public static final int COMP_SEND = 0x0;
    public static final int COMP_RECV_RDMA_WRITE_IMM = 0x1;
    public static final int COMP_RECV_SEND = 0x2;
    public static final int COMP_RECV_SEND_IMM = 0x3;
    public static final int COMP_SEND_ERR = 0xd;
    public static final int COMP_RECV_ERR = 0xe;

    private static final int E_TYPE = 0, E_SWQE_OPCODE = 1, E_SYND = 2, E_VENDOR_SYND = 3, E_IMM = 4, E_USER_DATA = 8, E_QPN = 12,
            E_WQE_COUNTER = 16, E_BYTES = 20, E_TIMESTAMP = 24;
    private static final long CQE_TIMESTAMP = 0x30;

    private DocaDpaDevCompletion() {
    }

    /**
     * {@code doca_dpa_dev_get_completion}: the next completion element that has arrived, or 0 when
     * none has (DOCA returns 0 then; the element comes back through the out parameter, here as
     * the result). The CQE's owner bit is read before its fields, ordered by a read fence.
     */
    public static long getCompletion(long comp) {
        Dpa.objectEnter(comp);
        int ci = Dpa.ld32(comp + OFF_CI);
        int log = Dpa.ld32(comp + OFF_LOG);
        long cqe = FlexioDevQueue.cqeAt(Dpa.ld64(comp + OFF_RING), ci, log);
        if (FlexioDevQueue.cqeGetOwner(cqe) != (ci >>> log & 1) || FlexioDevQueue.cqeGetOpcode(cqe) == FlexioDevQueue.CQE_INVALID) {
            Dpa.objectLeave(comp);
            return 0;
        }
        Dpa.memoryFence(Dpa.R, Dpa.R); // the fields after the owner bit
        long e = Dpa.ld64(comp + OFF_ELEMS) + (long) (ci & (1 << log) - 1) * ELEM_SIZE;
        int type = FlexioDevQueue.cqeGetOpcode(cqe);
        int qpn = FlexioDevQueue.cqeGetQpn(cqe);
        boolean error = type == COMP_SEND_ERR || type == COMP_RECV_ERR;
        Dpa.st8(e + E_TYPE, type);
        Dpa.st8(e + E_SWQE_OPCODE, type == COMP_SEND ? Integer.reverseBytes(Dpa.ld32(cqe + 0x38)) >>> 24 : 0);
        Dpa.st8(e + E_SYND, error ? FlexioDevQueue.cqeGetErrSynd(cqe) : 0);
        Dpa.st8(e + E_VENDOR_SYND, error ? FlexioDevQueue.cqeGetVendorErrSynd(cqe) : 0);
        Dpa.st32(e + E_IMM, FlexioDevQueue.cqeGetImm(cqe));
        int entry = entry(comp, qpn);
        Dpa.st32(e + E_USER_DATA, entry < 0 ? -1 : Dpa.ld32(comp + OFF_TABLE + 8L * entry + 4));
        long sqCi = entry < 0 ? 0 : Dpa.ld64(comp + OFF_CI_TABLE + 8L * entry);
        if (sqCi != 0 && (type == COMP_SEND || type == COMP_SEND_ERR)) {
            Dpa.st32(sqCi, FlexioDevQueue.cqeGetWqeCounter(cqe) + 1 & 0xffff); // a send completion covers its WQE and every earlier one
        }
        Dpa.st32(e + E_QPN, qpn);
        Dpa.st32(e + E_WQE_COUNTER, FlexioDevQueue.cqeGetWqeCounter(cqe));
        Dpa.st32(e + E_BYTES, FlexioDevQueue.cqeGetByteCnt(cqe));
        Dpa.st64(e + E_TIMESTAMP, error ? 0 : Long.reverseBytes(Dpa.ld64(cqe + CQE_TIMESTAMP)));
        Dpa.st32(comp + OFF_CI, ci + 1);
        Dpa.objectLeave(comp);
        return e;
    }

    /** The table's entry of QP {@code qpn} (its user data: a connection id, an async ops' user data), or -1 for a QP no context attached. */
    private static int entry(long comp, int qpn) {
        int n = Dpa.ld32(comp + OFF_NQPS);
        for (int i = 0; i < n && i < MAX_QPS; i++) {
            if (Dpa.ld32(comp + OFF_TABLE + 8L * i) == qpn) {
                return i;
            }
        }
        return -1;
    }

    /** {@code doca_dpa_dev_get_completion_type}: one of {@code COMP_*}. */
    public static int getCompletionType(long element) {
        return Dpa.ld8(element + E_TYPE);
    }

    /**
     * {@code doca_dpa_dev_get_completion_user_data}: the RDMA connection id of the completion's
     * connection, or the user data of the async ops it belongs to ({@code doca_dpa_async_ops_create}).
     */
    public static int getCompletionUserData(long element) {
        return Dpa.ld32(element + E_USER_DATA);
    }

    /** {@code doca_dpa_dev_get_completion_immediate}: for RECV_RDMA_WRITE_IMM and RECV_SEND_IMM. */
    public static int getCompletionImmediate(long element) {
        return Dpa.ld32(element + E_IMM);
    }

    /** {@code doca_dpa_dev_completion_element_get_swqe_opcode}: the send WQE's opcode of a SEND completion (0 for a receive). */
    public static int completionElementGetSwqeOpcode(long element) {
        return Dpa.ld8(element + E_SWQE_OPCODE);
    }

    /** {@code doca_dpa_dev_completion_element_get_srqn}: 0, DOCA RDMA on the DPA here has no SRQ. */
    public static int completionElementGetSrqn(long element) {
        return 0;
    }

    /** {@code doca_dpa_dev_completion_element_get_qpn}. */
    public static int completionElementGetQpn(long element) {
        return Dpa.ld32(element + E_QPN);
    }

    /** {@code doca_dpa_dev_completion_element_get_wqe_counter}. */
    public static int completionElementGetWqeCounter(long element) {
        return Dpa.ld32(element + E_WQE_COUNTER);
    }

    /** {@code doca_dpa_dev_completion_element_get_received_bytes}. */
    public static int completionElementGetReceivedBytes(long element) {
        return Dpa.ld32(element + E_BYTES);
    }

    /** {@code doca_dpa_dev_completion_element_get_error_syndrome}: an error element's syndrome (0 otherwise). */
    public static int completionElementGetErrorSyndrome(long element) {
        return Dpa.ld8(element + E_SYND);
    }

    /** {@code doca_dpa_dev_completion_element_get_vendor_error_syndrome}: an error element's vendor syndrome (0 otherwise). */
    public static int completionElementGetVendorErrorSyndrome(long element) {
        return Dpa.ld8(element + E_VENDOR_SYND);
    }

    /** {@code doca_dpa_dev_completion_element_get_timestamp}: the CQE's timestamp as the device wrote it (0 for an error). */
    public static long completionElementGetTimestamp(long element) {
        return Dpa.ld64(element + E_TIMESTAMP);
    }

    /** {@code doca_dpa_dev_rdma_completion_get_wr_index}: the WQE counter of the completion. */
    public static int rdmaCompletionGetWrIndex(long element) {
        return completionElementGetWqeCounter(element);
    }

    /**
     * {@code doca_dpa_dev_completion_ack}: {@code num} elements read are released, so as many new
     * completions can arrive: the CQ's consumer index in its doorbell record, written back (the
     * NIC reads it). Acknowledging more than was read is the caller's error; it is clamped to what
     * was read, so the NIC never sees a consumer index past its own CQEs.
     */
    public static void completionAck(long comp, long num) {
        Dpa.objectEnter(comp);
        int acked = Dpa.ld32(comp + OFF_ACKED);
        int ci = Dpa.ld32(comp + OFF_CI);
        int next = (int) Math.min((long) acked + Math.max(num, 0), ci);
        Dpa.st32(comp + OFF_ACKED, next);
        FlexioDevQueue.dbrCqSetCi(Dpa.ld64(comp + OFF_DBR), next);
        Dpa.memoryWriteback();
        Dpa.objectLeave(comp);
    }

    /**
     * {@code doca_dpa_dev_completion_request_notification}: the next completion (or one already
     * there and not yet read) triggers the attached thread; without it none does, as DOCA
     * documents. Underneath: the CQ armed with the index of the next element to read
     * ({@code flexio_dev_cq_arm}) through the context's outbox.
     */
    public static void completionRequestNotification(long comp) {
        Dpa.objectEnter(comp);
        FlexioDev.outboxConfig(Dpa.ld32(comp + OFF_OUTBOX));
        FlexioDev.cqArm(Dpa.ld32(comp + OFF_CI), Dpa.ld32(comp + OFF_CQN));
        Dpa.objectLeave(comp);
    }
}
