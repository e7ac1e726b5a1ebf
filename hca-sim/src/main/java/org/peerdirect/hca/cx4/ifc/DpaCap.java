package org.peerdirect.hca.cx4.ifc;

/**
 * The DPA capability block (PRM {@code dpa_capabilities}), {@code QUERY_HCA_CAP} with
 * {@code op_mod = TYPE << 1 | mode}, 4096 bytes at byte 0x10 of the output like every block;
 * reported by the BlueField-3 only (a ConnectX-4 or ConnectX-6 Dx answers the type with
 * {@code BAD_PARAM}, so {@code doca_dpa_cap_is_supported} is false there).
 *
 * <p><b>peerdirect PRM extension v1.</b> The field names are the PRM's; the capability type and
 * the field positions are not public (mstflint names {@code ..._OP_MOD_DPA_CAPABILITIES} without a
 * value): the model defines them here, not NVIDIA.
 */
public final class DpaCap {

    private DpaCap() {
    }

    /** The capability type (op_mod {@code 0xa0} max, {@code 0xa1} current): peerdirect PRM extension v1. */
    public static final int TYPE = 0x50;

    public static final IfcField THREAD_AFFINITY_SINGLE_HART = new IfcField(0x00, 1);
    public static final IfcField THREAD_AFFINITY_HART_GROUP = new IfcField(0x01, 1);
    public static final IfcField LOG_MAX_NUM_DPA_MEM_BLOCKS = new IfcField(0x1b, 5);
    public static final IfcField PROCESS_WIN_PRIMARY = new IfcField(0x20, 1);
    public static final IfcField PROCESS_WIN_SECONDARY = new IfcField(0x21, 1);
    public static final IfcField DPA_AUTH_SUPPORTED = new IfcField(0x22, 1);
    public static final IfcField DPA_AUTH_ENABLED = new IfcField(0x23, 1);
    /** DPA memory of the function: 2^n bytes. */
    public static final IfcField LOG_MAX_DPA_MEM = new IfcField(0x3b, 5);
    public static final IfcField LOG_MAX_DPA_THREADS_PER_PROCESS = new IfcField(0x43, 5);
    public static final IfcField LOG_MAX_DPA_PROCESS = new IfcField(0x4b, 5);
    public static final IfcField LOG_MAX_DPA_THREADS = new IfcField(0x53, 5);
    public static final IfcField LOG_MAX_DPA_OUTBOX = new IfcField(0x5b, 5);
    /** Bytes of one DPA memory block. */
    public static final IfcField DPA_MEM_BLOCK_SIZE = new IfcField(0x60, 32);
    public static final IfcField MAX_NUM_DPA_THREAD_PER_GROUP = new IfcField(0x80, 16);
    public static final IfcField LOG_MAX_DPA_WINDOW = new IfcField(0x9b, 5);
    public static final IfcField LOG_MAX_DPA_PARTITIONS = new IfcField(0xa3, 5);
    /** Execution units (harts) of a partition: 2^n. */
    public static final IfcField LOG_MAX_HARTS_PER_PARTITION = new IfcField(0xab, 5);
    public static final IfcField LOG_MAX_VHCA_PER_PARTITION = new IfcField(0xb3, 5);
    public static final IfcField DPA_COREDUMP_TYPE = new IfcField(0xb8, 8);

    /*
     * Beyond the PRM's fields (peerdirect PRM extension v1, not in dpa_capabilities): what DOCA's
     * resource queries (doca_dpa_get_core_num, _get_num_eus_per_core, _get_total_num_eus_available,
     * _get_kernel_max_run_time) report and the PRM block does not carry.
     */
    /** EUs (harts) per DPA core: 2^n (BlueField-3: 16). */
    public static final IfcField LOG_HARTS_PER_CORE = new IfcField(0xc3, 5);
    /** EUs of the partition the DPA OS keeps for itself (ids 0..n-1; BlueField-3: 2). */
    public static final IfcField OS_RESERVED_HARTS = new IfcField(0xc8, 8);
    /** Seconds a kernel may run before the DPA OS's watchdog ends its process (DOCA's samples: 120). */
    public static final IfcField KERNEL_MAX_RUN_TIME = new IfcField(0xd0, 16);

    /** General object types (PRM): the DPA's, with their {@code general_obj_types} bit ({@code 1L << type}). */
    public static final int OBJ_DPA_MEM = 0x28;
    public static final int OBJ_DPA_PROCESS = 0x2a;
    public static final int OBJ_DPA_THREAD = 0x2b;
    public static final int OBJ_DPA_OUTBOX = 0x2d;
    public static final int OBJ_DPA_WINDOW = 0x39;
}
