package org.peerdirect.hca.cx4.ifc;

/**
 * Completion queues: {@code CREATE_CQ}/{@code DESTROY_CQ} with the CQ context ({@code struct
 * mlx5_ifc_cqc_bits}), the 64-byte CQE ({@code struct mlx5_cqe64}, {@code struct mlx5_err_cqe}),
 * its opcodes and syndromes, and the CQ doorbells (the two-dword record in memory and the UAR
 * register). Offsets from {@code include/linux/mlx5/device.h}, {@code mlx5_ifc.h} and rdma-core's
 * {@code mlx5dv.h}.
 */
public final class Cq {

    private Cq() {
    }

    // ---- CREATE_CQ (input 0x110 + pas)
    public static final long CREATE_CQ_IN_CQC = 0x10;
    public static final long CREATE_CQ_IN_PAS = 0x110;
    public static final IfcField CQC_CQE_SZ = new IfcField(0x08, 3);
    public static final IfcField CQC_OI = new IfcField(0x0e, 1);
    public static final IfcField CQC_ST = new IfcField(0x14, 4);
    public static final IfcField CQC_PAGE_OFFSET = new IfcField(0x54, 6);
    public static final IfcField CQC_LOG_CQ_SIZE = new IfcField(0x63, 5);
    public static final IfcField CQC_UAR_PAGE = new IfcField(0x68, 24);
    public static final IfcField CQC_C_EQN = new IfcField(0xa0, 32);
    public static final IfcField CQC_LOG_PAGE_SIZE = new IfcField(0xc3, 5);
    public static final IfcField CQC_CONSUMER_COUNTER = new IfcField(0x148, 24);
    public static final IfcField CQC_PRODUCER_COUNTER = new IfcField(0x168, 24);
    /** {@code dbr_addr}, 64 bits at cqc byte 0x38. */
    public static final long CQC_DBR_ADDR = 0x38;
    public static final int CQC_SIZE = 64;
    /** {@code cqe_sz} 0: 64-byte CQEs. */
    public static final int CQE_SZ_64 = 0;
    /** CQ states in {@code st}: armed, fired (an event was raised and no re-arm came yet). */
    public static final int CQ_STATE_ARMED = 0x9;
    public static final int CQ_STATE_FIRED = 0xa;

    // ---- CQE (64 bytes)
    public static final int CQE_SIZE = 64;
    public static final long CQE_SLID = 0x16;
    /** be32: bits 29:28 GRH present, bits 23:0 the source QP. */
    public static final long CQE_FLAGS_RQPN = 0x18;
    public static final long CQE_SRQN = 0x20;
    public static final long CQE_IMM = 0x24;
    public static final long CQE_BYTE_CNT = 0x2c;
    /** Error CQE: vendor syndrome and syndrome bytes. */
    public static final long CQE_VENDOR_ERR_SYND = 0x36;
    public static final long CQE_SYNDROME = 0x37;
    /** be32: bits 31:24 the opcode of the failed send WQE ({@code s_wqe_opcode}), bits 23:0 the QPN. */
    public static final long CQE_SOP_DROP_QPN = 0x38;
    public static final long CQE_WQE_COUNTER = 0x3c;
    public static final long CQE_SIGNATURE = 0x3e;
    /** opcode bits 7:4, solicited bit 1, owner bit 0. Buffers start at 0xf0 (opcode INVALID). */
    public static final long CQE_OP_OWN = 0x3f;

    // CQE opcodes (op_own >> 4)
    public static final int CQE_REQ = 0;
    public static final int CQE_RESP_WR_IMM = 1;
    public static final int CQE_RESP_SEND = 2;
    public static final int CQE_RESP_SEND_IMM = 3;
    public static final int CQE_RESP_SEND_INV = 4;
    public static final int CQE_REQ_ERR = 13;
    public static final int CQE_RESP_ERR = 14;
    public static final int CQE_INVALID = 15;

    // error syndromes (mlx5_err_cqe.syndrome)
    public static final int SYND_LOCAL_LENGTH = 0x01;
    public static final int SYND_LOCAL_QP_OP = 0x02;
    public static final int SYND_LOCAL_PROT = 0x04;
    public static final int SYND_WR_FLUSH = 0x05;
    public static final int SYND_MW_BIND = 0x06;
    public static final int SYND_BAD_RESP = 0x10;
    public static final int SYND_LOCAL_ACCESS = 0x11;
    public static final int SYND_REMOTE_INVAL_REQ = 0x12;
    public static final int SYND_REMOTE_ACCESS = 0x13;
    public static final int SYND_REMOTE_OP = 0x14;
    public static final int SYND_TRANSPORT_RETRY_EXC = 0x15;
    public static final int SYND_RNR_RETRY_EXC = 0x16;
    public static final int SYND_REMOTE_ABORTED = 0x22;

    // ---- doorbells
    /** Doorbell record: be32 [0] = set_ci (24 bits), [1] = the arm word. */
    public static final long DBR_SET_CI = 0;
    public static final long DBR_ARM = 4;
    /** The UAR's CQ doorbell register: 64 bits, {be32(sn << 28 | cmd | ci), be32(cqn)}. */
    public static final long UAR_CQ_DOORBELL = 0x20;
    /** Arm commands: the next completion ({@code MLX5_CQ_DB_REQ_NOT}), or the next solicited or error one. */
    public static final int DB_REQ_NOT = 0;
    public static final int DB_REQ_NOT_SOL = 1 << 24;

    // ---- CQ error event (type 0x04) data: cqn at data+1 (24 bits), syndrome at data+0xb
    public static final int CQ_ERROR_OVERRUN = 0x1;
    public static final int CQ_ERROR_ACCESS_VIOLATION = 0x2;
}
