package org.peerdirect.hca.cx4.ifc;

/**
 * {@code QUERY_HCA_CAP}/{@code SET_HCA_CAP} and the general capability block
 * ({@code struct mlx5_ifc_cmd_hca_cap_bits}, 4096 bytes at byte 0x10 of the query output and of the
 * set input). Field positions are the kernel's ({@code mlx5_ifc.h}); only the fields the model
 * and the driver use are named.
 */
public final class HcaCap {

    private HcaCap() {
    }

    /** Capability types, {@code op_mod = type << 1 | mode} for QUERY, {@code type << 1} for SET. */
    public static final int TYPE_GENERAL = 0;
    public static final int TYPE_ETH = 1;
    public static final int TYPE_ODP = 2;
    public static final int TYPE_ATOMIC = 3;
    public static final int TYPE_ROCE = 4;
    /** The DPA capability block ({@link DpaCap}); its type is not public: peerdirect PRM extension v1. */
    public static final int TYPE_DPA = DpaCap.TYPE;
    /** {@code HCA_CAP_OPMOD_GET_MAX} / {@code _CUR}. */
    public static final int MODE_MAX = 0;
    public static final int MODE_CUR = 1;

    public static final int SIZE = 4096;
    /** The block's offset in the query output and in the set input. */
    public static final int OFFSET = 0x10;
    public static final int QUERY_OUT_LEN = OFFSET + SIZE;
    public static final int SET_IN_LEN = OFFSET + SIZE;

    public static final IfcField PAGE_REQUEST_DISABLE = new IfcField(0x6, 1);
    public static final IfcField LOG_MAX_SRQ_SZ = new IfcField(0x80, 8);
    public static final IfcField LOG_MAX_QP_SZ = new IfcField(0x88, 8);
    public static final IfcField LOG_MAX_QP = new IfcField(0x9b, 5);
    public static final IfcField LOG_MAX_SRQ = new IfcField(0xab, 5);
    public static final IfcField LOG_MAX_CQ_SZ = new IfcField(0xc8, 8);
    public static final IfcField LOG_MAX_CQ = new IfcField(0xdb, 5);
    public static final IfcField LOG_MAX_EQ_SZ = new IfcField(0xe0, 8);
    public static final IfcField LOG_MAX_MKEY = new IfcField(0xea, 6);
    public static final IfcField FAST_TEARDOWN = new IfcField(0xfb, 1);
    public static final IfcField LOG_MAX_EQ = new IfcField(0xfc, 4);
    /** KSM mkeys whose entries all cover the same fixed size (what implicit ODP's parent is). */
    public static final IfcField FIXED_BUFFER_SIZE = new IfcField(0x108, 1);
    public static final IfcField FORCE_TEARDOWN = new IfcField(0x110, 1);
    /** UMR's {@code xlt_offset} has its high part (bits 47:16): MTTs beyond 2^16 octowords can be written ({@code odp_max_size} unbounded). */
    public static final IfcField UMR_EXTENDED_TRANSLATION_OFFSET = new IfcField(0x118, 1);
    /** The null mkey exists ({@code QUERY_SPECIAL_CONTEXTS}): a KSM entry pointing at it faults. */
    public static final IfcField NULL_MKEY = new IfcField(0x119, 1);
    public static final IfcField LOG_MAX_KLM_LIST_SIZE = new IfcField(0x11a, 6);
    public static final IfcField LOG_MAX_RA_REQ_QP = new IfcField(0x14a, 6);
    /**
     * Model-only: the device executes IBA 1.5 ATOMIC WRITE ({@code Wqe.OP_ATOMIC_WRITE}). The PRM
     * has no such bit (no ConnectX generation carries the operation upstream); the model reports
     * it in bits the ConnectX-4-era layout leaves reserved ({@code reserved_at_150}, before
     * {@code log_max_ra_res_qp}) so the driver learns it as it learns every capability.
     */
    public static final IfcField ATOMIC_WRITE = new IfcField(0x150, 1);
    /** Model-only, as {@link #ATOMIC_WRITE}: RDMA FLUSH with the global-visibility placement type ({@code Wqe.OP_FLUSH}). */
    public static final IfcField FLUSH_GLOBAL = new IfcField(0x151, 1);
    /** Model-only, as {@link #ATOMIC_WRITE}: RDMA FLUSH with the persistence placement type (flushing reads reach the memory's device). */
    public static final IfcField FLUSH_PERSISTENT = new IfcField(0x152, 1);
    public static final IfcField LOG_MAX_RA_RES_QP = new IfcField(0x15a, 6);
    public static final IfcField CACHE_LINE_128BYTE = new IfcField(0x164, 1);
    public static final IfcField GID_TABLE_SIZE = new IfcField(0x170, 16);
    /** Encoded: the table has {@code 128 << value} entries ({@code mlx5_to_sw_pkey_sz}). */
    public static final IfcField PKEY_TABLE_SIZE = new IfcField(0x190, 16);
    public static final IfcField LOCAL_CA_ACK_DELAY = new IfcField(0x1ab, 5);
    /** {@link #PORT_TYPE_IB} or {@link #PORT_TYPE_ETH}. */
    public static final IfcField PORT_TYPE = new IfcField(0x1b6, 2);
    public static final IfcField NUM_PORTS = new IfcField(0x1b8, 8);
    public static final IfcField LOG_MAX_MSG = new IfcField(0x1c3, 5);
    public static final IfcField CQE_VERSION = new IfcField(0x1fc, 4);
    public static final IfcField DRAIN_SIGERR = new IfcField(0x20f, 1);
    public static final IfcField CMDIF_CHECKSUM = new IfcField(0x210, 2);
    public static final IfcField DCT = new IfcField(0x21a, 1);
    public static final IfcField ROCE = new IfcField(0x21d, 1);
    public static final IfcField ATOMIC = new IfcField(0x21e, 1);
    /** Page faults: on-demand paging ({@code pg}); the ODP block (type 2) says for which operations. */
    public static final IfcField PG = new IfcField(0x227, 1);
    public static final IfcField XRC = new IfcField(0x23c, 1);
    public static final IfcField UD = new IfcField(0x23d, 1);
    public static final IfcField UC = new IfcField(0x23e, 1);
    public static final IfcField RC = new IfcField(0x23f, 1);
    public static final IfcField UAR_4K = new IfcField(0x240, 1);
    public static final IfcField UAR_SZ = new IfcField(0x24a, 6);
    public static final IfcField LOG_PG_SZ = new IfcField(0x258, 8);
    public static final IfcField BF = new IfcField(0x260, 1);
    public static final IfcField DRIVER_VERSION = new IfcField(0x261, 1);
    public static final IfcField LOG_BF_REG_SIZE = new IfcField(0x26b, 5);
    public static final IfcField MAX_WQE_SZ_SQ = new IfcField(0x290, 16);
    public static final IfcField MAX_WQE_SZ_RQ = new IfcField(0x2b0, 16);
    public static final IfcField LOG_MAX_PD = new IfcField(0x32b, 5);
    public static final IfcField LOG_MAX_XRCD = new IfcField(0x33b, 5);
    /**
     * The general objects the device creates ({@code general_obj_types}, 64 bits big-endian at byte
     * 0x80): bit {@code t} set when {@code obj_type t} is supported ({@code 1ULL << type}); read
     * with {@link #GENERAL_OBJ_TYPES} as a 64-bit word.
     */
    public static final long GENERAL_OBJ_TYPES = 0x80;
    /** DevX user contexts: {@code CREATE_UCTX} gives up to 2^n uids (0: no DevX). */
    public static final IfcField LOG_MAX_UCTX = new IfcField(0x463, 5);
    /** DevX umems: up to 2^n ({@code CREATE_UMEM}). */
    public static final IfcField LOG_MAX_UMEM = new IfcField(0x46b, 5);
    /** A umem may be created with uid 0 (the kernel's own). */
    public static final IfcField UMEM_UID_0 = new IfcField(0x252, 1);
    public static final IfcField MAX_NUM_EQS = new IfcField(0x470, 16);
    public static final IfcField LOG_UAR_PAGE_SZ = new IfcField(0x490, 16);
    public static final IfcField NUM_OF_UARS_PER_PAGE = new IfcField(0x520, 32);
    public static final IfcField SW_OWNER_ID = new IfcField(0x61e, 1);

    public static final int PORT_TYPE_IB = 0;
    public static final int PORT_TYPE_ETH = 1;
}
