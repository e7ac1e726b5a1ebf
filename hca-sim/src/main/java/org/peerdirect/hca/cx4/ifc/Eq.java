package org.peerdirect.hca.cx4.ifc;

/**
 * Event queues: the 64-byte EQE ({@code struct mlx5_eqe}), the EQ context ({@code struct
 * mlx5_ifc_eqc_bits}) and {@code CREATE_EQ}/{@code DESTROY_EQ}/{@code GEN_EQE}, the event types
 * ({@code enum mlx5_event}) and the EQ doorbells in a UAR page.
 */
public final class Eq {

    private Eq() {
    }

    // ---- EQE (64 bytes)
    public static final int EQE_SIZE = 64;
    public static final long EQE_TYPE = 0x01;
    public static final long EQE_SUB_TYPE = 0x03;
    /** The 28-byte data union. */
    public static final long EQE_DATA = 0x20;
    public static final long EQE_SIGNATURE = 0x3e;
    /** bit 0: owner. Software initialises it to 1 ({@code MLX5_EQE_OWNER_INIT_VAL}). */
    public static final long EQE_OWNER = 0x3f;
    public static final int EQE_OWNER_INIT_VAL = 1;

    // ---- event types
    public static final int EVENT_COMP = 0x00;
    public static final int EVENT_PATH_MIG = 0x01;
    public static final int EVENT_COMM_EST = 0x02;
    public static final int EVENT_SQ_DRAINED = 0x03;
    public static final int EVENT_CQ_ERROR = 0x04;
    public static final int EVENT_WQ_CATAS_ERROR = 0x05;
    public static final int EVENT_INTERNAL_ERROR = 0x08;
    public static final int EVENT_PORT_CHANGE = 0x09;
    /**
     * {@code MLX5_EVENT_TYPE_OBJECT_CHANGE}: a general object changed (the model's DPA process
     * error); {@code mlx5_eqe_obj_change}: {@code obj_type} be16 at data byte 2, {@code obj_id} be32 at 4.
     */
    public static final int EVENT_OBJECT_CHANGE = 0x27;
    public static final long OBJ_CHANGE_TYPE = 2;
    public static final long OBJ_CHANGE_ID = 4;
    public static final int EVENT_CMD = 0x0a;
    public static final int EVENT_PAGE_REQUEST = 0x0b;
    public static final int EVENT_PAGE_FAULT = 0x0c;
    public static final int EVENT_PATH_MIG_FAILED = 0x07;
    public static final int EVENT_WQ_INVAL_REQ_ERROR = 0x10;
    public static final int EVENT_WQ_ACCESS_ERROR = 0x11;
    public static final int EVENT_SRQ_CATAS_ERROR = 0x12;
    public static final int EVENT_SRQ_LAST_WQE = 0x13;
    public static final int EVENT_SRQ_RQ_LIMIT = 0x14;

    /** PORT_CHANGE data: the port number in the high nibble of data byte 8 ({@code mlx5_eqe_port_state.port}); subtypes below. */
    public static final long PORT_CHANGE_PORT = 0x08;
    public static final int PORT_CHANGE_SUBTYPE_DOWN = 1;
    public static final int PORT_CHANGE_SUBTYPE_ACTIVE = 4;
    public static final int PORT_CHANGE_SUBTYPE_INITIALIZED = 5;
    public static final int PORT_CHANGE_SUBTYPE_LID = 6;
    public static final int PORT_CHANGE_SUBTYPE_PKEY = 7;
    public static final int PORT_CHANGE_SUBTYPE_GUID = 8;
    public static final int PORT_CHANGE_SUBTYPE_CLIENT_REREG = 9;

    // ---- PAGE_REQUEST data: ec_function (be16) at data+0, func_id (be16) at data+2, num_pages (be32, signed) at data+4
    public static final long PAGE_REQ_FUNC_ID = EQE_DATA + 0x02;
    public static final long PAGE_REQ_NUM_PAGES = EQE_DATA + 0x04;

    // ---- EQ context (64 bytes, at CREATE_EQ input byte 0x10)
    public static final IfcField EQC_STATUS = new IfcField(0x00, 4);
    public static final IfcField EQC_OI = new IfcField(0x0e, 1);
    public static final IfcField EQC_ST = new IfcField(0x14, 4);
    public static final IfcField EQC_PAGE_OFFSET = new IfcField(0x54, 6);
    public static final IfcField EQC_LOG_EQ_SIZE = new IfcField(0x63, 5);
    public static final IfcField EQC_UAR_PAGE = new IfcField(0x68, 24);
    public static final IfcField EQC_INTR = new IfcField(0xb4, 12);
    public static final IfcField EQC_LOG_PAGE_SIZE = new IfcField(0xc3, 5);
    public static final IfcField EQC_CONSUMER_COUNTER = new IfcField(0x148, 24);
    public static final IfcField EQC_PRODUCER_COUNTER = new IfcField(0x168, 24);
    public static final int EQC_SIZE = 64;
    /** EQ states ({@code st}): armed, fired, always armed. */
    public static final int ST_ARMED = 0x9;
    public static final int ST_FIRED = 0xa;
    public static final int ST_ALWAYS_ARMED = 0xb;

    // ---- CREATE_EQ
    public static final long CREATE_EQ_IN_EQC = 0x10;
    /** {@code event_bitmask[0]}: events 0..63 as one big-endian 64-bit word. */
    public static final long CREATE_EQ_IN_EVENT_BITMASK = 0x58;
    public static final long CREATE_EQ_IN_PAS = 0x110;
    public static final long CREATE_EQ_OUT_EQN = 0x0b;
    /** {@code DESTROY_EQ} / {@code QUERY_EQ} / {@code GEN_EQE} input: the EQ number's byte. */
    public static final long EQN_IN = 0x0b;
    /** {@code QUERY_EQ} output: the context at 0x10, the bitmask at 0x58 (as {@code CREATE_EQ}'s input). */
    public static final int QUERY_EQ_OUT_LEN = 0x110;
    /** {@code GEN_EQE} input: the EQE to post at 0x10 (64 bytes). */
    public static final long GEN_EQE_IN_EQE = 0x10;
    public static final int GEN_EQE_IN_LEN = 0x50;

    // ---- doorbells, in a UAR page: be32 {@code eqn << 24 | consumer_index}
    /** Updates the consumer index and arms the EQ ({@code MLX5_EQ_DOORBEL_OFFSET}). */
    public static final long UAR_EQ_ARM_CI = 0x40;
    /** Updates the consumer index without arming. */
    public static final long UAR_EQ_CI = 0x48;
}
