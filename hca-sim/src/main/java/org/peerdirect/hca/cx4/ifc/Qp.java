package org.peerdirect.hca.cx4.ifc;

/**
 * Queue pairs: {@code CREATE_QP}, the state-transition commands and {@code QUERY_QP} with the QP
 * context ({@code struct mlx5_ifc_qpc_bits}, its primary address path {@code mlx5_ifc_ads_bits}),
 * the send-WQE segments ({@code struct mlx5_wqe_ctrl_seg}, {@code _raddr_seg},
 * {@code _atomic_seg}, {@code _data_seg}, inline, and the UD address vector {@code struct
 * mlx5_av}) and the doorbells. Bit offsets count from the QPC's first bit.
 */
public final class Qp {

    private Qp() {
    }

    // ---- commands: qpn at input byte 0x09 (24 bits), opt_param_mask at 0x10, qpc at 0x18
    public static final int RST2INIT_QP = 0x502;
    public static final int INIT2RTR_QP = 0x503;
    public static final int RTR2RTS_QP = 0x504;
    public static final int RTS2RTS_QP = 0x505;
    public static final int SQERR2RTS_QP = 0x506;
    public static final int QP_2ERR = 0x507;
    public static final int QP_2RST = 0x50a;
    public static final int QUERY_QP = 0x50b;
    public static final int INIT2INIT_QP = 0x50e;

    public static final long IN_QPN = 0x08; // Pages.INDEX24 shape: dw2[23:0]
    public static final long IN_OPT_PARAM_MASK = 0x10;
    public static final long IN_QPC = 0x18;
    public static final long CREATE_QP_IN_PAS = 0x110;
    /** The modify commands' input: header, qpn, mask, qpc (0x18 + 0xe8) and reserved up to 0x110 (rst2init_qp_in). */
    public static final int MODIFY_IN_LEN = 0x110;
    /** QUERY_QP output: header, opt_param_mask at 0x08, qpc at 0x20, pas after 0x110. */
    public static final long QUERY_OUT_QPC = 0x20;
    public static final int QUERY_OUT_LEN = 0x110;
    public static final int QPC_SIZE = 0xe8;

    // ---- QPC
    public static final IfcField QPC_STATE = new IfcField(0x00, 4);
    public static final IfcField QPC_ST = new IfcField(0x08, 8);
    public static final IfcField QPC_PM_STATE = new IfcField(0x13, 2);
    public static final IfcField QPC_PD = new IfcField(0x28, 24);
    public static final IfcField QPC_MTU = new IfcField(0x40, 3);
    public static final IfcField QPC_LOG_MSG_MAX = new IfcField(0x43, 5);
    public static final IfcField QPC_LOG_RQ_SIZE = new IfcField(0x49, 4);
    /** Receive WQE stride: 16 << log_rq_stride bytes. */
    public static final IfcField QPC_LOG_RQ_STRIDE = new IfcField(0x4d, 3);
    public static final IfcField QPC_NO_SQ = new IfcField(0x50, 1);
    public static final IfcField QPC_LOG_SQ_SIZE = new IfcField(0x51, 4);
    public static final IfcField QPC_UAR_PAGE = new IfcField(0x68, 24);
    public static final IfcField QPC_USER_INDEX = new IfcField(0x88, 24);
    public static final IfcField QPC_LOG_PAGE_SIZE = new IfcField(0xa3, 5);
    public static final IfcField QPC_REMOTE_QPN = new IfcField(0xa8, 24);
    // primary address path (ads at bit 0xc0)
    public static final IfcField QPC_PRI_PKEY_INDEX = new IfcField(0xc0 + 0x10, 16);
    public static final IfcField QPC_PRI_GRH = new IfcField(0xc0 + 0x28, 1);
    public static final IfcField QPC_PRI_RLID = new IfcField(0xc0 + 0x30, 16);
    public static final IfcField QPC_PRI_ACK_TIMEOUT = new IfcField(0xc0 + 0x40, 5);
    public static final IfcField QPC_PRI_SRC_ADDR_INDEX = new IfcField(0xc0 + 0x48, 8);
    public static final IfcField QPC_PRI_HOP_LIMIT = new IfcField(0xc0 + 0x58, 8);
    /** The primary path's remote GID (16 bytes) at this qpc byte offset. */
    public static final long QPC_PRI_RGID = (0xc0 + 0x80) / 8;
    public static final IfcField QPC_PRI_VHCA_PORT_NUM = new IfcField(0xc0 + 0x128, 8);
    public static final IfcField QPC_LOG_SRA_MAX = new IfcField(0x388, 3);
    public static final IfcField QPC_RETRY_COUNT = new IfcField(0x38d, 3);
    public static final IfcField QPC_RNR_RETRY = new IfcField(0x390, 3);
    public static final IfcField QPC_NEXT_SEND_PSN = new IfcField(0x3c8, 24);
    public static final IfcField QPC_CQN_SND = new IfcField(0x3e8, 24);
    public static final IfcField QPC_LOG_RRA_MAX = new IfcField(0x488, 3);
    /**
     * Model-only ({@code reserved_at_480} before {@code log_rra_max}): the responder accepts RDMA
     * FLUSH with the global / persistent placement type ({@code IB_ACCESS_FLUSH_*} of the QP).
     */
    public static final IfcField QPC_FLUSH_GLOBAL = new IfcField(0x486, 1);
    public static final IfcField QPC_FLUSH_PERSISTENT = new IfcField(0x487, 1);
    public static final IfcField QPC_RRE = new IfcField(0x490, 1);
    public static final IfcField QPC_RWE = new IfcField(0x491, 1);
    public static final IfcField QPC_RAE = new IfcField(0x492, 1);
    public static final IfcField QPC_PAGE_OFFSET = new IfcField(0x494, 6);
    public static final IfcField QPC_MIN_RNR_NAK = new IfcField(0x4a3, 5);
    public static final IfcField QPC_NEXT_RCV_PSN = new IfcField(0x4a8, 24);
    public static final IfcField QPC_CQN_RCV = new IfcField(0x4e8, 24);
    /** An XRC QP's domain ({@code qpc.xrcd}). */
    public static final IfcField QPC_XRCD = new IfcField(0x4c8, 24);
    /** {@code struct mlx5_wqe_xrc_seg}: 16 bytes after an XRC send WQE's control segment, {@code xrc_srqn} (be32) first. */
    public static final int XRC_SEG_SIZE = 16;
    public static final long XRC_SRQN = 0;
    /** {@code dbr_addr}, 64 bits at qpc byte 0xa0. */
    public static final long QPC_DBR_ADDR = 0xa0;
    public static final IfcField QPC_Q_KEY = new IfcField(0x540, 32);
    public static final IfcField QPC_RQ_TYPE = new IfcField(0x565, 3);
    public static final IfcField QPC_SRQN = new IfcField(0x568, 24);
    public static final IfcField QPC_HW_SQ_WQEBB_COUNTER = new IfcField(0x5a0, 16);
    public static final IfcField QPC_HW_RQ_COUNTER = new IfcField(0x5c0, 32);

    // QPC values
    public static final int STATE_RST = 0x0;
    public static final int STATE_INIT = 0x1;
    public static final int STATE_RTR = 0x2;
    public static final int STATE_RTS = 0x3;
    public static final int STATE_SQER = 0x4;
    public static final int STATE_ERR = 0x6;
    public static final int STATE_SQD = 0x7;
    public static final int ST_RC = 0x0;
    public static final int ST_UC = 0x1;
    public static final int ST_UD = 0x2;
    public static final int ST_XRC = 0x3;
    public static final int ST_REG_UMR = 0xc;
    public static final int PM_MIGRATED = 0x3;
    /** rq_type: a regular RQ, an SRQ, no RQ ({@code MLX5_NON_ZERO_RQ}, {@code MLX5_SRQ_RQ}, {@code MLX5_ZERO_LEN_RQ}). */
    public static final int RQ_REGULAR = 0x0;
    public static final int RQ_SRQ = 0x1;
    public static final int RQ_ZERO_LEN = 0x3;

    // ---- doorbell record: be32 [0] receive counter (16 bits used), [1] send counter in WQE BBs (16 bits)
    public static final long DBR_RCV = 0;
    public static final long DBR_SND = 4;
    /** BlueFlame registers in a UAR page: 4 of {@code 1 << log_bf_reg_size} bytes from 0x800. */
    public static final long UAR_BF_OFFSET = 0x800;
    public static final int BF_REGS_PER_UAR = 4;

    // ---- send WQE: basic blocks of 64 bytes, segments of 16
    public static final int SEND_WQE_BB = 64;
    public static final int SEND_WQE_SHIFT = 6;
    public static final int DS_SIZE = 16;
    /** ctrl: be32 opmod(8) | wqe_index(16) | opcode(8). */
    public static final long CTRL_OPMOD_IDX_OPCODE = 0x00;
    /** ctrl: be32 qpn(24) | ds(6): the WQE's size in 16-byte units. */
    public static final long CTRL_QPN_DS = 0x04;
    public static final long CTRL_SIGNATURE = 0x08;
    /** ctrl: fence bits 7:5, completion bits 3:2, solicited bit 1. */
    public static final long CTRL_FM_CE_SE = 0x0b;
    public static final long CTRL_IMM = 0x0c;
    public static final int CTRL_CQ_UPDATE = 2 << 2;
    public static final int CTRL_SOLICITED = 1 << 1;
    public static final int CTRL_FENCE = 4 << 5;
    /** raddr segment: be64 address, be32 rkey. */
    public static final long RADDR_VA = 0x0;
    public static final long RADDR_RKEY = 0x8;
    /** Model-only: an RDMA FLUSH WQE's range length in the remote-address segment's reserved last word. */
    public static final long RADDR_FLUSH_LEN = 0xc;
    /** atomic segment: be64 swap (CS) or add (FA), be64 compare. */
    public static final long ATOMIC_SWAP_ADD = 0x0;
    public static final long ATOMIC_COMPARE = 0x8;
    /** data segment: be32 byte count, be32 lkey, be64 address. */
    public static final long DATA_BYTE_COUNT = 0x0;
    public static final long DATA_LKEY = 0x4;
    public static final long DATA_ADDR = 0x8;
    /** Inline segment: be32 byte count or-ed with this, then the bytes, padded to 16. */
    public static final int INLINE_SEG = 0x8000_0000;
    /** The lkey that ends a receive WQE's scatter list shorter than its stride ({@code MLX5_INVALID_LKEY}). */
    public static final int INVALID_LKEY = 0x100;
    /** UD address vector (48 bytes, {@code struct mlx5_av}): qkey, dqp with the extended bit, rlid, GRH and rgid. */
    public static final int AV_SIZE = 48;
    public static final long AV_QKEY = 0x00;
    public static final long AV_DQP = 0x08;
    public static final int AV_EXTENDED = 0x8000_0000;
    public static final long AV_RLID = 0x0e;
    /** {@code mlx5_wqe_av.hop_limit}. */
    public static final long AV_HOP_LIMIT = 0x1b;
    public static final long AV_GRH_GID_FL = 0x1c;
    public static final int AV_GRH = 1 << 30;
    public static final long AV_RGID = 0x20;
}
