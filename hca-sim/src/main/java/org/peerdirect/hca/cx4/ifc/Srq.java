package org.peerdirect.hca.cx4.ifc;

/**
 * Shared receive queues: {@code CREATE_SRQ} / {@code DESTROY_SRQ} with the SRQ context
 * ({@code struct mlx5_ifc_srqc_bits}; bit offsets from its first bit), the WQE's next segment
 * ({@code struct mlx5_wqe_srq_next_seg}) and the doorbell record. An SRQ's WQEs form a linked
 * list through their next segments: the device consumes them from the list's head, the library
 * puts a completed WQE back at its tail ({@code mlx5_free_srq_wqe}), and the doorbell record
 * counts the WQEs posted ({@code srq->counter}).
 */
public final class Srq {

    private Srq() {
    }

    /** create_srq_in: the context at byte 0x10, the page list at 0x110. */
    public static final long CREATE_SRQ_IN_SRQC = 0x10;
    public static final long CREATE_SRQ_IN_PAS = 0x110;
    /** The SRQ context's size in bytes. */
    public static final int SRQC_SIZE = 64;

    public static final IfcField SRQC_STATE = new IfcField(0x00, 4);
    public static final IfcField SRQC_LOG_SRQ_SIZE = new IfcField(0x04, 4);
    public static final IfcField SRQC_WQ_SIGNATURE = new IfcField(0x20, 1);
    /** log2 of the WQE stride in 16-byte units. */
    public static final IfcField SRQC_LOG_RQ_STRIDE = new IfcField(0x25, 3);
    public static final IfcField SRQC_XRCD = new IfcField(0x28, 24);
    public static final IfcField SRQC_PAGE_OFFSET = new IfcField(0x40, 6);
    public static final IfcField SRQC_CQN = new IfcField(0x48, 24);
    public static final IfcField SRQC_LOG_PAGE_SIZE = new IfcField(0x82, 6);
    public static final IfcField SRQC_PD = new IfcField(0xc8, 24);
    public static final IfcField SRQC_LWM = new IfcField(0xe0, 16);
    public static final IfcField SRQC_WQE_CNT = new IfcField(0xf0, 16);
    /** dbr_addr (64 bits) at this byte offset of the context. */
    public static final long SRQC_DBR_ADDR = 0x140 / 8;

    /** The next segment: 16 bytes before the data segments, {@code next_wqe_index} (be16) at byte 2. */
    public static final int NEXT_SEG_SIZE = 16;
    public static final long NEXT_WQE_INDEX = 2;
    /** The doorbell record: be32 count of WQEs posted. */
    public static final long DBR_COUNTER = 0;

    /** {@code QUERY_SRQ} output: the context at byte 0x10 ({@code srq_context_entry}); the page list (not returned) after 0x110. */
    public static final long QUERY_SRQ_OUT_SRQC = 0x10;
    public static final int QUERY_SRQ_OUT_LEN = 0x110;
    /** {@code ARM_RQ} input: op_mod 1 arms an SRQ ({@code MLX5_ARM_RQ_IN_OP_MOD_SRQ}); {@code srq_number} (24 bits) at byte 0x08, {@code lwm} (be16) at 0x0e. */
    public static final int ARM_RQ_OP_MOD_SRQ = 1;
    public static final long ARM_RQ_IN_LWM = 0x0e;
    /**
     * Affiliated events of QPs and SRQs ({@code struct mlx5_eqe_qp_srq} in the EQE data): the
     * queue's type at data byte 0x14 ({@code MLX5_EVENT_QUEUE_TYPE_QP} 0, {@code _RQ} 1), its
     * number (24 bits) at data byte 0x18.
     */
    public static final long EQE_QP_SRQ_TYPE = 0x14;
    public static final long EQE_QP_SRQ_N = 0x18;
    public static final int EVENT_QUEUE_TYPE_QP = 0;
    public static final int EVENT_QUEUE_TYPE_RQ = 1;

    /** QPC {@code rq_type} of a QP receiving through an SRQ, and its {@code srqn_rmpn_xrqn}. */
    public static final int RQ_SRQ = 0x1;
    public static final IfcField QPC_SRQN = new IfcField(0x568, 24);
}
