package org.peerdirect.hca.cx3.ifc;

/**
 * The mailbox of the QP transition commands ({@code RST2INIT_QP} ... {@code 2RST_QP}, input
 * modifier: the QPN) and of {@code QUERY_QP}'s output: {@code optparam}, a reserved dword, then
 * {@code struct mlx4_qp_context} from {@link #CONTEXT}, with its primary path
 * ({@code struct mlx4_qp_path}, 0x2c bytes) at {@link #PRI_PATH}. Offsets below are from the
 * context's start, as {@code include/linux/mlx4/qp.h} lays the structures out (0xf8 bytes).
 */
public final class QpContext {

    public static final int OPTPARAM = 0x00;
    public static final int CONTEXT = 0x08;
    public static final int MAILBOX_SIZE = CONTEXT + 0xf8;

    /** be32: state (bits 31..28), service type (bits 23..16). */
    public static final int FLAGS = 0x00;
    public static final int PD = 0x04;
    /** u8: path MTU (bits 7..5), log2 max message (bits 4..0). */
    public static final int MTU_MSGMAX = 0x08;
    /** u8 each: log2 WQEs (bits 6..3), log2 stride minus 4 (bits 2..0); an RQ of 0 with an SRQ. */
    public static final int RQ_SIZE_STRIDE = 0x09;
    public static final int SQ_SIZE_STRIDE = 0x0a;
    public static final int USR_PAGE = 0x0c;
    public static final int LOCAL_QPN = 0x10;
    public static final int REMOTE_QPN = 0x14;
    public static final int PRI_PATH = 0x18;
    public static final int ALT_PATH = 0x44;
    /** be32: log2 sra_max (23..21), retry count (18..16), rnr retry (15..13). */
    public static final int PARAMS1 = 0x70;
    public static final int NEXT_SEND_PSN = 0x78;
    public static final int CQN_SEND = 0x7c;
    public static final int LAST_ACKED_PSN = 0x88;
    public static final int SSN = 0x8c;
    /** be32: log2 rra_max (23..21), RRE (15), RWE (14), RAE (13). */
    public static final int PARAMS2 = 0x90;
    /** be32: min RNR NAK timer (28..24), the next receive PSN (23..0). */
    public static final int RNR_NEXTRECVPSN = 0x94;
    public static final int CQN_RECV = 0x9c;
    public static final int DB_REC_ADDR = 0xa0;
    public static final int QKEY = 0xa8;
    public static final int SRQN = 0xac;
    public static final int RQ_WQE_COUNTER = 0xb4;
    public static final int SQ_WQE_COUNTER = 0xb6;
    /** u8: log2 of the buffer's page size minus 12 ({@code mtt.page_shift - MLX4_ICM_PAGE_SHIFT}). */
    public static final int LOG_PAGE_SIZE = 0xc8;
    /** u8 + be32: the byte address of the buffer's first MTT entry ({@code mlx4_mtt_addr}). */
    public static final int MTT_BASE_ADDR_H = 0xcb;
    public static final int MTT_BASE_ADDR_L = 0xcc;
    /** {@link #SRQN}'s bit 24: the QP receives from the SRQ in bits 23..0. */
    public static final int SRQN_USE_SRQ = 1 << 24;

    // struct mlx4_qp_path, from the path's start
    public static final int PATH_PKEY_INDEX = 0x03;
    /** u8: GRH present (bit 7), my LMC bits. */
    public static final int PATH_GRH_MYLMC = 0x05;
    public static final int PATH_RLID = 0x06;
    /** u8: the local ACK timeout (bits 7..3). */
    public static final int PATH_ACKTO = 0x08;
    public static final int PATH_RGID = 0x10;
    /** u8: {@code 0x83 | (port - 1) << 6}. */
    public static final int PATH_SCHED_QUEUE = 0x20;
    public static final int PATH_SIZE = 0x2c;

    public static final int PARAMS2_RRE = 1 << 15;
    public static final int PARAMS2_RWE = 1 << 14;
    public static final int PARAMS2_RAE = 1 << 13;

    /** {@code enum mlx4_qp_state}. */
    public static final int STATE_RST = 0;
    public static final int STATE_INIT = 1;
    public static final int STATE_RTR = 2;
    public static final int STATE_RTS = 3;
    public static final int STATE_SQER = 4;
    public static final int STATE_SQD = 5;
    public static final int STATE_ERR = 6;

    /** Service types ({@code MLX4_QP_ST_RC}, {@code MLX4_QP_ST_UD}). */
    public static final int ST_RC = 0x0;
    public static final int ST_UD = 0x3;

    private QpContext() {
    }

    /** The sched_queue byte of {@code port}. */
    public static int schedQueue(int port) {
        return 0x83 | (port - 1 & 1) << 6;
    }

    /** The port a sched_queue byte names. */
    public static int port(int schedQueue) {
        return (schedQueue >>> 6 & 1) + 1;
    }
}
