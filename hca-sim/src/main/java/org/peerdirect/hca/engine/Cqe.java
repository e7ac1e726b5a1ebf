package org.peerdirect.hca.engine;

/**
 * A completion queue entry as the hardware writes it ({@code struct mlx4_cqe}): the QP, the WQE
 * index of the completed request, the opcode (the send WQE's opcode, a receive opcode, or
 * {@link #OPCODE_ERROR} with a syndrome), the byte count, the immediate, the source of a
 * receive and its flags. Values from {@code include/linux/mlx4/cq.h} and {@code qp.h}.
 */
public final class Cqe {

    /** Receive opcodes ({@code MLX4_RECV_OPCODE_*}). */
    public static final int RECV_RDMA_WRITE_IMM = 0x00;
    public static final int RECV_SEND = 0x01;
    public static final int RECV_SEND_IMM = 0x02;
    /** {@code MLX4_CQE_OPCODE_ERROR}: the syndrome says what failed. */
    public static final int OPCODE_ERROR = 0x1e;

    /** Syndromes ({@code MLX4_CQE_SYNDROME_*}). */
    public static final int SYNDROME_LOCAL_LENGTH_ERR = 0x01;
    public static final int SYNDROME_LOCAL_QP_OP_ERR = 0x02;
    public static final int SYNDROME_LOCAL_PROT_ERR = 0x04;
    public static final int SYNDROME_WR_FLUSH_ERR = 0x05;
    public static final int SYNDROME_MW_BIND_ERR = 0x06;
    public static final int SYNDROME_BAD_RESP_ERR = 0x10;
    public static final int SYNDROME_LOCAL_ACCESS_ERR = 0x11;
    public static final int SYNDROME_REMOTE_INVAL_REQ_ERR = 0x12;
    public static final int SYNDROME_REMOTE_ACCESS_ERR = 0x13;
    public static final int SYNDROME_REMOTE_OP_ERR = 0x14;
    public static final int SYNDROME_TRANSPORT_RETRY_EXC_ERR = 0x15;
    public static final int SYNDROME_RNR_RETRY_EXC_ERR = 0x16;
    public static final int SYNDROME_REMOTE_ABORTED_ERR = 0x22;

    /** Flag: the receive buffer starts with a 40-byte GRH (the CQE's G bit). */
    public static final int FLAG_GRH = 1;
    /** Flag: the immediate field is valid. */
    public static final int FLAG_IMM = 1 << 1;

    public int qpn;
    /** Send or receive side ({@code MLX4_CQE_IS_SEND_MASK}). */
    public boolean isSend;
    /** The completed WQE's index in its queue (monotonic; the driver takes it modulo the size). */
    public long wqeIndex;
    public int opcode;
    /** For {@link #OPCODE_ERROR}: the syndrome; the opcode of the failed WQE is in {@link #errorOpcode}. */
    public int syndrome;
    public int errorOpcode;
    public int vendorSyndrome;
    public int byteCnt;
    public int imm;
    public int flags;
    /** A receive's SRQ number (an XRC SRQ's, or the QP's SRQ's); 0: none (SRQ numbers start at 1 so that 0 says so, as mlx5's {@code srqn} CQE field). */
    public int srqn;
    public int slid;
    public int srcQp;

    void copyFrom(Cqe o) {
        qpn = o.qpn;
        isSend = o.isSend;
        wqeIndex = o.wqeIndex;
        opcode = o.opcode;
        syndrome = o.syndrome;
        errorOpcode = o.errorOpcode;
        vendorSyndrome = o.vendorSyndrome;
        byteCnt = o.byteCnt;
        imm = o.imm;
        flags = o.flags;
        slid = o.slid;
        srcQp = o.srcQp;
    }
}
