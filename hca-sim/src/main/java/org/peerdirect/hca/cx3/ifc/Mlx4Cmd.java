package org.peerdirect.hca.cx3.ifc;

import java.util.Map;
import java.util.TreeMap;

/**
 * Opcodes ({@code include/linux/mlx4/cmd.h}), command statuses ({@code CMD_STAT_*} of
 * {@code cmd.c}), mailbox size and the event-type numbers of the ConnectX-3 command interface,
 * with their names for logs.
 */
public final class Mlx4Cmd {

    /** A command mailbox: one 4 KiB page ({@code MLX4_MAILBOX_SIZE}). */
    public static final int MAILBOX_SIZE = 4096;

    // initialization and general commands
    public static final int SYS_EN = 0x1;
    public static final int SYS_DIS = 0x2;
    public static final int MAP_FA = 0xfff;
    public static final int UNMAP_FA = 0xffe;
    public static final int RUN_FW = 0xff6;
    public static final int MOD_STAT_CFG = 0x34;
    public static final int QUERY_DEV_CAP = 0x3;
    public static final int QUERY_FW = 0x4;
    public static final int ENABLE_LAM = 0xff8;
    public static final int DISABLE_LAM = 0xff7;
    public static final int QUERY_DDR = 0x5;
    public static final int QUERY_ADAPTER = 0x6;
    public static final int INIT_HCA = 0x7;
    public static final int CLOSE_HCA = 0x8;
    public static final int INIT_PORT = 0x9;
    public static final int CLOSE_PORT = 0xa;
    public static final int QUERY_HCA = 0xb;
    public static final int QUERY_PORT = 0x43;
    public static final int SENSE_PORT = 0x4d;
    public static final int HW_HEALTH_CHECK = 0x50;
    public static final int SET_PORT = 0xc;
    public static final int SET_NODE = 0x5a;
    public static final int ACCESS_DDR = 0x2e;
    public static final int MAP_ICM = 0xffa;
    public static final int UNMAP_ICM = 0xff9;
    public static final int MAP_ICM_AUX = 0xffc;
    public static final int UNMAP_ICM_AUX = 0xffb;
    public static final int SET_ICM_SIZE = 0xffd;
    // TPT commands
    public static final int SW2HW_MPT = 0xd;
    public static final int QUERY_MPT = 0xe;
    public static final int HW2SW_MPT = 0xf;
    public static final int READ_MTT = 0x10;
    public static final int WRITE_MTT = 0x11;
    public static final int SYNC_TPT = 0x2f;
    // EQ commands
    public static final int MAP_EQ = 0x12;
    public static final int SW2HW_EQ = 0x13;
    public static final int HW2SW_EQ = 0x14;
    public static final int QUERY_EQ = 0x15;
    // CQ commands
    public static final int SW2HW_CQ = 0x16;
    public static final int HW2SW_CQ = 0x17;
    public static final int QUERY_CQ = 0x18;
    public static final int MODIFY_CQ = 0x2c;
    // SRQ commands
    public static final int SW2HW_SRQ = 0x35;
    public static final int HW2SW_SRQ = 0x36;
    public static final int QUERY_SRQ = 0x37;
    public static final int ARM_SRQ = 0x40;
    // QP/EE commands
    public static final int RST2INIT_QP = 0x19;
    public static final int INIT2RTR_QP = 0x1a;
    public static final int RTR2RTS_QP = 0x1b;
    public static final int RTS2RTS_QP = 0x1c;
    public static final int SQERR2RTS_QP = 0x1d;
    public static final int TWO_ERR_QP = 0x1e;
    public static final int RTS2SQD_QP = 0x1f;
    public static final int SQD2SQD_QP = 0x38;
    public static final int SQD2RTS_QP = 0x20;
    public static final int TWO_RST_QP = 0x21;
    public static final int QUERY_QP = 0x22;
    public static final int INIT2INIT_QP = 0x2d;
    public static final int SUSPEND_QP = 0x32;
    public static final int UNSUSPEND_QP = 0x33;
    // special QP and management commands
    public static final int CONF_SPECIAL_QP = 0x23;
    public static final int MAD_IFC = 0x24;
    // miscellaneous
    public static final int DIAG_RPRT = 0x30;
    public static final int NOP = 0x31;

    // command statuses (CMD_STAT_*)
    public static final int STAT_OK = 0x00;
    /** Internal error (such as a bus error) occurred while processing the command. */
    public static final int STAT_INTERNAL_ERR = 0x01;
    /** Operation/command not supported or opcode modifier not supported. */
    public static final int STAT_BAD_OP = 0x02;
    /** Parameter not supported or out of range. */
    public static final int STAT_BAD_PARAM = 0x03;
    /** System not enabled or bad system state. */
    public static final int STAT_BAD_SYS_STATE = 0x04;
    /** Attempt to access reserved or unallocated resource. */
    public static final int STAT_BAD_RESOURCE = 0x05;
    /** Requested resource is currently executing a command, or is otherwise busy. */
    public static final int STAT_RESOURCE_BUSY = 0x06;
    /** Required capability exceeds device limits. */
    public static final int STAT_EXCEED_LIM = 0x08;
    /** Resource is not in the appropriate state or ownership. */
    public static final int STAT_BAD_RES_STATE = 0x09;
    /** Index out of range. */
    public static final int STAT_BAD_INDEX = 0x0a;
    /** FW image corrupted. */
    public static final int STAT_BAD_NVMEM = 0x0b;
    /** Error in ICM mapping (e.g. not enough auxiliary ICM pages to execute command). */
    public static final int STAT_ICM_ERROR = 0x0c;
    /** Attempt to modify a QP/EE which is not in the presumed state. */
    public static final int STAT_BAD_QP_STATE = 0x10;
    /** Bad segment parameters (Address/Size). */
    public static final int STAT_BAD_SEG_PARAM = 0x20;
    /** Memory Region has Memory Windows bound to. */
    public static final int STAT_REG_BOUND = 0x21;
    /** HCA local attached memory not present. */
    public static final int STAT_LAM_NOT_PRE = 0x22;
    /** Bad management packet (silently discarded). */
    public static final int STAT_BAD_PKT = 0x30;
    /** More outstanding CQEs in CQ than new CQ size. */
    public static final int STAT_BAD_SIZE = 0x40;
    /** Multi Function device support required. */
    public static final int STAT_MULTI_FUNC_REQ = 0x50;

    // event types (enum mlx4_event)
    public static final int EVENT_COMP = 0x00;
    public static final int EVENT_PATH_MIG = 0x01;
    public static final int EVENT_COMM_EST = 0x02;
    public static final int EVENT_SQ_DRAINED = 0x03;
    public static final int EVENT_CQ_ERROR = 0x04;
    public static final int EVENT_WQ_CATAS_ERROR = 0x05;
    public static final int EVENT_LOCAL_CATAS_ERROR = 0x08;
    public static final int EVENT_PORT_CHANGE = 0x09;
    public static final int EVENT_CMD = 0x0a;
    public static final int EVENT_EQ_OVERFLOW = 0x0f;
    public static final int EVENT_WQ_INVAL_REQ_ERROR = 0x10;
    public static final int EVENT_WQ_ACCESS_ERROR = 0x11;
    public static final int EVENT_SRQ_CATAS_ERROR = 0x12;
    public static final int EVENT_SRQ_QP_LAST_WQE = 0x13;
    public static final int EVENT_SRQ_LIMIT = 0x14;

    /** {@code MLX4_PORT_CHANGE_SUBTYPE_DOWN} / {@code _ACTIVE}. */
    public static final int PORT_CHANGE_SUBTYPE_DOWN = 1;
    public static final int PORT_CHANGE_SUBTYPE_ACTIVE = 4;

    /** {@code MLX4_ASYNC_EVENT_MASK}: what the driver maps to its async EQ. */
    public static final long ASYNC_EVENT_MASK = 1L << EVENT_PATH_MIG | 1L << EVENT_COMM_EST | 1L << EVENT_SQ_DRAINED
            | 1L << EVENT_CQ_ERROR | 1L << EVENT_WQ_CATAS_ERROR | 1L << EVENT_LOCAL_CATAS_ERROR | 1L << EVENT_PORT_CHANGE
            | 1L << EVENT_EQ_OVERFLOW | 1L << EVENT_WQ_INVAL_REQ_ERROR | 1L << EVENT_WQ_ACCESS_ERROR | 1L << EVENT_SRQ_CATAS_ERROR
            | 1L << EVENT_SRQ_QP_LAST_WQE | 1L << EVENT_SRQ_LIMIT | 1L << EVENT_CMD;

    private static final Map<Integer, String> NAMES = new TreeMap<>();
    private static final Map<Integer, String> STATUSES = new TreeMap<>();

    static {
        for (java.lang.reflect.Field f : Mlx4Cmd.class.getFields()) {
            if (f.getType() != int.class || f.getName().startsWith("EVENT_") || f.getName().startsWith("PORT_CHANGE")
                    || f.getName().equals("MAILBOX_SIZE")) {
                continue;
            }
            try {
                int v = f.getInt(null);
                String n = f.getName().replace("TWO_", "2");
                if (n.startsWith("STAT_")) {
                    STATUSES.put(v, n.substring(5));
                } else {
                    NAMES.put(v, n);
                }
            } catch (IllegalAccessException e) {
                throw new AssertionError(e);
            }
        }
    }

    private Mlx4Cmd() {
    }

    /** The opcode's name ({@code SW2HW_MPT}), or its number in hex. */
    public static String name(int opcode) {
        String n = NAMES.get(opcode);
        return n != null ? n : String.format("0x%x", opcode);
    }

    /** The status's name without {@code CMD_STAT_} ({@code BAD_PARAM}), or its number in hex. */
    public static String statusName(int status) {
        String n = STATUSES.get(status);
        return n != null ? n : String.format("0x%02x", status);
    }

    /** Whether the model knows the opcode at all. */
    public static boolean known(int opcode) {
        return NAMES.containsKey(opcode);
    }
}
