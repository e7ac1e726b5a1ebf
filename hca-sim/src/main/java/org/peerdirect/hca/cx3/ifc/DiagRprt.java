package org.peerdirect.hca.cx3.ifc;

/**
 * {@code DIAG_RPRT} (0x30) with {@code op_modifier} {@code MLX4_OP_MOD_QUERY_TRANSPORT_CI_ERRORS}:
 * the transport and CI error counters, 32-bit big-endian at fixed offsets of the output mailbox;
 * {@code in_modifier} is the port (0: the device's sums). The offsets and names are those of
 * {@code drivers/infiniband/hw/mlx4/main.c}'s {@code diag_basic}, {@code diag_ext} and
 * {@code diag_device_only}, which {@code mlx4_query_diag_counters} reads with {@code MLX4_GET}.
 */
public final class DiagRprt {

    private DiagRprt() {
    }

    public static final int OP_MOD_QUERY_TRANSPORT_CI_ERRORS = 2;
    /** The output mailbox (one page). */
    public static final int OUT_SIZE = 4096;

    public static final int RQ_NUM_LLE = 0x00, SQ_NUM_LLE = 0x04, RQ_NUM_LQPOE = 0x08, SQ_NUM_LQPOE = 0x0C, RQ_NUM_LPE = 0x18,
            SQ_NUM_LPE = 0x1C, RQ_NUM_WRFE = 0x20, SQ_NUM_WRFE = 0x24, SQ_NUM_MWBE = 0x2C, SQ_NUM_BRE = 0x34, SQ_NUM_RIRE = 0x44,
            RQ_NUM_RIRE = 0x48, SQ_NUM_RAE = 0x4C, RQ_NUM_RAE = 0x50, SQ_NUM_ROE = 0x54, SQ_NUM_TREE = 0x5C, SQ_NUM_RREE = 0x64,
            RQ_NUM_RNR = 0x68, SQ_NUM_RNR = 0x6C, RQ_NUM_OOS = 0x100, SQ_NUM_OOS = 0x104, RQ_NUM_DUP = 0x130, SQ_NUM_TO = 0x134,
            RQ_NUM_UDSDPRD = 0x118, NUM_CQOVF = 0x1A0;

    /** {@code diag_basic} then {@code diag_ext}: the port counters' names, in the kernel's order, and their offsets. */
    public static final String[] PORT_NAMES = {"rq_num_lle", "sq_num_lle", "rq_num_lqpoe", "sq_num_lqpoe", "rq_num_lpe", "sq_num_lpe",
        "rq_num_wrfe", "sq_num_wrfe", "sq_num_mwbe", "sq_num_bre", "sq_num_rire", "rq_num_rire", "sq_num_rae", "rq_num_rae", "sq_num_roe",
        "sq_num_tree", "sq_num_rree", "rq_num_rnr", "sq_num_rnr", "rq_num_oos", "sq_num_oos", "rq_num_dup", "sq_num_to"};
    public static final int[] PORT_OFFSETS = {RQ_NUM_LLE, SQ_NUM_LLE, RQ_NUM_LQPOE, SQ_NUM_LQPOE, RQ_NUM_LPE, SQ_NUM_LPE, RQ_NUM_WRFE,
        SQ_NUM_WRFE, SQ_NUM_MWBE, SQ_NUM_BRE, SQ_NUM_RIRE, RQ_NUM_RIRE, SQ_NUM_RAE, RQ_NUM_RAE, SQ_NUM_ROE, SQ_NUM_TREE, SQ_NUM_RREE,
        RQ_NUM_RNR, SQ_NUM_RNR, RQ_NUM_OOS, SQ_NUM_OOS, RQ_NUM_DUP, SQ_NUM_TO};
}
