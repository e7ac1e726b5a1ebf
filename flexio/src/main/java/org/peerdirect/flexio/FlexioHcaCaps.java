package org.peerdirect.flexio;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.DpaCap;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.mlx5.dv.Mlx5dv;

/**
 * The DPA capabilities of a device, as libflexio's {@code flexio_query_prm_hca_caps} gives them to
 * DOCA: {@code QUERY_HCA_CAP} of the DPA type (current values) through
 * {@code mlx5dv_devx_general_cmd}, the one way user space reaches the block. A device without
 * DevX (the driver's EOPNOTSUPP) or whose firmware refuses the type (BAD_PARAM: no DPA) answers
 * {@link #dpa} false with every count 0.
 *
 * <p>The fields are the block's ({@link DpaCap}); {@code hartsPerCore}, {@code osReservedHarts}
 * and {@code kernelMaxRunTime} are the model's extension of it (peerdirect PRM extension v1: the
 * PRM's {@code dpa_capabilities} has no such fields, DOCA's resource queries need them).
 *
 * @param dpa whether the device reports a DPA
 * @param harts EUs of the partition (2^{@code log_max_harts_per_partition})
 * @param hartsPerCore EUs per DPA core
 * @param osReservedHarts EUs the DPA OS keeps, ids {@code 0..n-1}
 * @param kernelMaxRunTime seconds an activation may run before the watchdog ends its process
 * @param maxThreadsPerProcess DPA threads one process may have
 * @param maxThreadsPerGroup {@code max_num_dpa_thread_per_group}
 * @param singleHartAffinity {@code thread_affinity_single_hart}
 * @param hartGroupAffinity {@code thread_affinity_hart_group}
 */
public record FlexioHcaCaps(boolean dpa, int harts, int hartsPerCore, int osReservedHarts, int kernelMaxRunTime, int maxThreadsPerProcess,
        int maxThreadsPerGroup, boolean singleHartAffinity, boolean hartGroupAffinity) {

    private static final FlexioHcaCaps NONE = new FlexioHcaCaps(false, 0, 0, 0, 0, 0, 0, false, false);

    /**
     * {@code flexio_query_prm_hca_caps(ibv_ctx)}.
     *
     * @throws FlexioException FAILED when the driver or firmware refused the query for another
     *         reason than "no DPA" (its message)
     */
    public static FlexioHcaCaps query(IbvContext ctx) {
        MemorySegment in = MemorySegment.ofArray(new byte[16]);
        in.set(CmdEntry.BE32, 0, Mlx5Cmd.QUERY_HCA_CAP << 16);
        in.set(CmdEntry.BE32, 4, HcaCap.TYPE_DPA << 1 | HcaCap.MODE_CUR);
        MemorySegment out;
        try {
            out = Mlx5dv.devxGeneralCmd(ctx, in, HcaCap.QUERY_OUT_LEN);
        } catch (KernelException e) {
            if (e.errno() == KernelException.Errno.EOPNOTSUPP || e.errno() == KernelException.Errno.EINVAL) {
                return NONE; // no DevX, or the firmware answers the DPA type with BAD_PARAM
            }
            throw new FlexioException(FlexioStatus.FAILED, "flexio_query_prm_hca_caps: " + e.getMessage(), e);
        }
        long o = HcaCap.OFFSET;
        return new FlexioHcaCaps(true, 1 << DpaCap.LOG_MAX_HARTS_PER_PARTITION.get(out, o), 1 << DpaCap.LOG_HARTS_PER_CORE.get(out, o),
                DpaCap.OS_RESERVED_HARTS.get(out, o), DpaCap.KERNEL_MAX_RUN_TIME.get(out, o),
                1 << DpaCap.LOG_MAX_DPA_THREADS_PER_PROCESS.get(out, o), DpaCap.MAX_NUM_DPA_THREAD_PER_GROUP.get(out, o),
                DpaCap.THREAD_AFFINITY_SINGLE_HART.get(out, o) == 1, DpaCap.THREAD_AFFINITY_HART_GROUP.get(out, o) == 1);
    }
}
