package org.peerdirect.hca.cx4.ifc;

/**
 * Command opcodes ({@code MLX5_CMD_OP_*}), command status codes ({@code MLX5_CMD_STAT_*}) and the
 * common input/output header: input dw0 = {@code opcode << 16 | uid}, dw1 low 16 bits
 * {@code op_mod}; output byte 0 status, dw1 syndrome.
 */
public final class Mlx5Cmd {

    private Mlx5Cmd() {
    }

    public static final int QUERY_HCA_CAP = 0x100;
    public static final int QUERY_ADAPTER = 0x101;
    public static final int INIT_HCA = 0x102;
    public static final int TEARDOWN_HCA = 0x103;
    public static final int ENABLE_HCA = 0x104;
    public static final int DISABLE_HCA = 0x105;
    public static final int QUERY_PAGES = 0x107;
    public static final int MANAGE_PAGES = 0x108;
    public static final int SET_HCA_CAP = 0x109;
    public static final int QUERY_ISSI = 0x10a;
    public static final int SET_ISSI = 0x10b;
    public static final int SET_DRIVER_VERSION = 0x10d;
    public static final int CREATE_MKEY = 0x200;
    public static final int DESTROY_MKEY = 0x202;
    public static final int QUERY_SPECIAL_CONTEXTS = 0x203;
    public static final int PAGE_FAULT_RESUME = 0x204;
    public static final int CREATE_EQ = 0x301;
    /** DevX ({@code devx.c}): general objects, user contexts (uids) and umems. */
    public static final int CREATE_GENERAL_OBJECT = 0xa00;
    public static final int MODIFY_GENERAL_OBJECT = 0xa01;
    public static final int QUERY_GENERAL_OBJECT = 0xa02;
    public static final int DESTROY_GENERAL_OBJECT = 0xa03;
    public static final int CREATE_UCTX = 0xa04;
    public static final int DESTROY_UCTX = 0xa06;
    public static final int CREATE_UMEM = 0xa08;
    public static final int DESTROY_UMEM = 0xa0a;
    public static final int DESTROY_EQ = 0x302;
    public static final int QUERY_EQ = 0x303;
    public static final int GEN_EQE = 0x304;
    public static final int CREATE_CQ = 0x400;
    public static final int DESTROY_CQ = 0x401;
    public static final int QUERY_CQ = 0x402;
    public static final int CREATE_QP = 0x500;
    public static final int DESTROY_QP = 0x501;
    public static final int RST2INIT_QP = Qp.RST2INIT_QP;
    public static final int INIT2RTR_QP = Qp.INIT2RTR_QP;
    public static final int RTR2RTS_QP = Qp.RTR2RTS_QP;
    public static final int RTS2RTS_QP = Qp.RTS2RTS_QP;
    public static final int SQERR2RTS_QP = Qp.SQERR2RTS_QP;
    public static final int QP_2ERR = Qp.QP_2ERR;
    public static final int QP_2RST = Qp.QP_2RST;
    public static final int QUERY_QP = Qp.QUERY_QP;
    public static final int INIT2INIT_QP = Qp.INIT2INIT_QP;
    public static final int CREATE_SRQ = 0x700;
    public static final int DESTROY_SRQ = 0x701;
    public static final int QUERY_SRQ = 0x702;
    public static final int ARM_RQ = 0x703;
    public static final int CREATE_XRC_SRQ = 0x705;
    public static final int DESTROY_XRC_SRQ = 0x706;
    public static final int QUERY_XRC_SRQ = 0x707;
    public static final int ARM_XRC_SRQ = 0x708;
    public static final int QUERY_VPORT_STATE = 0x750;
    public static final int QUERY_VPORT_COUNTER = 0x770;
    public static final int QUERY_Q_COUNTER = 0x773;
    public static final int QUERY_HCA_VPORT_CONTEXT = 0x762;
    public static final int QUERY_HCA_VPORT_GID = 0x764;
    public static final int ALLOC_PD = 0x800;
    public static final int DEALLOC_PD = 0x801;
    public static final int ALLOC_UAR = 0x802;
    public static final int DEALLOC_UAR = 0x803;
    public static final int ACCESS_REG = 0x805;
    public static final int NOP = 0x80d;
    public static final int ALLOC_XRCD = 0x80e;
    public static final int DEALLOC_XRCD = 0x80f;

    /** Command status ({@code MLX5_CMD_STAT_*}, output byte 0). */
    public static final int STAT_OK = 0x00;
    public static final int STAT_INT_ERR = 0x01;
    public static final int STAT_BAD_OP_ERR = 0x02;
    public static final int STAT_BAD_PARAM_ERR = 0x03;
    public static final int STAT_BAD_SYS_STATE_ERR = 0x04;
    public static final int STAT_BAD_RES_ERR = 0x05;
    public static final int STAT_RES_BUSY = 0x06;
    public static final int STAT_NOT_READY = 0x07;
    public static final int STAT_LIM_ERR = 0x08;
    public static final int STAT_BAD_RES_STATE_ERR = 0x09;
    public static final int STAT_IX_ERR = 0x0a;
    public static final int STAT_NO_RES_ERR = 0x0f;
    public static final int STAT_BAD_QP_STATE_ERR = 0x10;
    public static final int STAT_BAD_PKT_ERR = 0x30;
    public static final int STAT_BAD_SIZE_OUTS_CQES_ERR = 0x40;
    public static final int STAT_BAD_INP_LEN_ERR = 0x50;
    public static final int STAT_BAD_OUTP_LEN_ERR = 0x51;

    /** {@code query_issi_out}: {@code current_issi} (low 16 bits of dw2) and {@code supported_issi_dw0} at 0x6c. */
    public static final int QUERY_ISSI_OUT_LEN = 0x70;
    public static final int QUERY_ISSI_OUT_SUPPORTED = 0x6c;

    /** The status name as {@code cmd_status_str} prints it. */
    public static String statusName(int status) {
        return switch (status) {
            case STAT_OK -> "OK";
            case STAT_INT_ERR -> "internal error";
            case STAT_BAD_OP_ERR -> "bad operation";
            case STAT_BAD_PARAM_ERR -> "bad parameter";
            case STAT_BAD_SYS_STATE_ERR -> "bad system state";
            case STAT_BAD_RES_ERR -> "bad resource";
            case STAT_RES_BUSY -> "resource busy";
            case STAT_NOT_READY -> "not ready";
            case STAT_LIM_ERR -> "limits exceeded";
            case STAT_BAD_RES_STATE_ERR -> "bad resource state";
            case STAT_IX_ERR -> "bad index";
            case STAT_NO_RES_ERR -> "no resources";
            case STAT_BAD_QP_STATE_ERR -> "bad QP state";
            case STAT_BAD_PKT_ERR -> "bad packet (discarded)";
            case STAT_BAD_SIZE_OUTS_CQES_ERR -> "bad size too many outstanding CQEs";
            case STAT_BAD_INP_LEN_ERR -> "bad input length";
            case STAT_BAD_OUTP_LEN_ERR -> "bad output length";
            default -> "unknown status 0x" + Integer.toHexString(status);
        };
    }

    /** The opcode's name as {@code mlx5_command_str} prints it, for command logs. */
    public static String name(int opcode) {
        return switch (opcode) {
            case QUERY_HCA_CAP -> "QUERY_HCA_CAP";
            case QUERY_ADAPTER -> "QUERY_ADAPTER";
            case INIT_HCA -> "INIT_HCA";
            case TEARDOWN_HCA -> "TEARDOWN_HCA";
            case ENABLE_HCA -> "ENABLE_HCA";
            case DISABLE_HCA -> "DISABLE_HCA";
            case QUERY_PAGES -> "QUERY_PAGES";
            case MANAGE_PAGES -> "MANAGE_PAGES";
            case SET_HCA_CAP -> "SET_HCA_CAP";
            case QUERY_ISSI -> "QUERY_ISSI";
            case SET_ISSI -> "SET_ISSI";
            case SET_DRIVER_VERSION -> "SET_DRIVER_VERSION";
            case CREATE_MKEY -> "CREATE_MKEY";
            case DESTROY_MKEY -> "DESTROY_MKEY";
            case QUERY_SPECIAL_CONTEXTS -> "QUERY_SPECIAL_CONTEXTS";
            case PAGE_FAULT_RESUME -> "PAGE_FAULT_RESUME";
            case CREATE_EQ -> "CREATE_EQ";
            case DESTROY_EQ -> "DESTROY_EQ";
            case QUERY_EQ -> "QUERY_EQ";
            case GEN_EQE -> "GEN_EQE";
            case CREATE_CQ -> "CREATE_CQ";
            case DESTROY_CQ -> "DESTROY_CQ";
            case QUERY_CQ -> "QUERY_CQ";
            case CREATE_QP -> "CREATE_QP";
            case DESTROY_QP -> "DESTROY_QP";
            case RST2INIT_QP -> "RST2INIT_QP";
            case INIT2RTR_QP -> "INIT2RTR_QP";
            case RTR2RTS_QP -> "RTR2RTS_QP";
            case RTS2RTS_QP -> "RTS2RTS_QP";
            case SQERR2RTS_QP -> "SQERR2RTS_QP";
            case QP_2ERR -> "2ERR_QP";
            case QP_2RST -> "2RST_QP";
            case QUERY_QP -> "QUERY_QP";
            case INIT2INIT_QP -> "INIT2INIT_QP";
            case CREATE_SRQ -> "CREATE_SRQ";
            case DESTROY_SRQ -> "DESTROY_SRQ";
            case QUERY_SRQ -> "QUERY_SRQ";
            case ARM_RQ -> "ARM_RQ";
            case CREATE_XRC_SRQ -> "CREATE_XRC_SRQ";
            case DESTROY_XRC_SRQ -> "DESTROY_XRC_SRQ";
            case QUERY_XRC_SRQ -> "QUERY_XRC_SRQ";
            case ARM_XRC_SRQ -> "ARM_XRC_SRQ";
            case ALLOC_XRCD -> "ALLOC_XRCD";
            case DEALLOC_XRCD -> "DEALLOC_XRCD";
            case QUERY_VPORT_STATE -> "QUERY_VPORT_STATE";
            case QUERY_VPORT_COUNTER -> "QUERY_VPORT_COUNTER";
            case QUERY_Q_COUNTER -> "QUERY_Q_COUNTER";
            case QUERY_HCA_VPORT_CONTEXT -> "QUERY_HCA_VPORT_CONTEXT";
            case QUERY_HCA_VPORT_GID -> "QUERY_HCA_VPORT_GID";
            case ALLOC_PD -> "ALLOC_PD";
            case DEALLOC_PD -> "DEALLOC_PD";
            case ALLOC_UAR -> "ALLOC_UAR";
            case DEALLOC_UAR -> "DEALLOC_UAR";
            case ACCESS_REG -> "ACCESS_REG";
            case NOP -> "NOP";
            case CREATE_GENERAL_OBJECT -> "CREATE_GENERAL_OBJECT";
            case MODIFY_GENERAL_OBJECT -> "MODIFY_GENERAL_OBJECT";
            case QUERY_GENERAL_OBJECT -> "QUERY_GENERAL_OBJECT";
            case DESTROY_GENERAL_OBJECT -> "DESTROY_GENERAL_OBJECT";
            case CREATE_UCTX -> "CREATE_UCTX";
            case DESTROY_UCTX -> "DESTROY_UCTX";
            case CREATE_UMEM -> "CREATE_UMEM";
            case DESTROY_UMEM -> "DESTROY_UMEM";
            default -> String.format("unknown command opcode 0x%x", opcode);
        };
    }
}
