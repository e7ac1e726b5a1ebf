package org.peerdirect.doca.dpa;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioHcaCaps;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.kernel.mm.KernelException;

/**
 * What DOCA DPA's resource queries answer, from the device's DPA capability block as FlexIO reads
 * it ({@link FlexioHcaCaps}: {@code QUERY_HCA_CAP} through {@code mlx5dv_devx_general_cmd}).
 *
 * <ul>
 * <li>{@code doca_dpa_get_total_num_eus_available}: {@link #harts} — every EU of the partition,
 * what DOCA's {@code dpa_nvqual} sample takes as the bound of EU ids. Which of them a thread may
 * be pinned to the sample finds by starting a thread on each (the DPA OS's own EUs, ids
 * {@code 0..osReservedHarts-1}, refuse it); the user's excluded-EU list is taken out after.</li>
 * <li>{@code _get_core_num}: harts / EUs per core; {@code _get_num_eus_per_core}.</li>
 * <li>{@code _get_max_threads_per_kernel}: {@link #maxThreadsPerKernel} — the EUs a user may run
 * on (a kernel's ranks may wait for one another, so each needs an EU of its own), at most the DPA
 * threads one process may have.</li>
 * <li>{@code _get_kernel_max_run_time}: seconds before the DPA OS's watchdog ends the process.</li>
 * </ul>
 *
 * @param harts EUs of the partition
 * @param hartsPerCore EUs per DPA core
 * @param osReservedHarts EUs the DPA OS keeps (ids {@code 0..n-1})
 * @param kernelMaxRunTime seconds a kernel may run
 * @param maxThreadsPerProcess DPA threads one process may have
 */
public record DocaDpaCaps(int harts, int hartsPerCore, int osReservedHarts, int kernelMaxRunTime, int maxThreadsPerProcess) {

    /** The threads one kernel launch may have: the user's EUs, at most the threads of a process. */
    public int maxThreadsPerKernel() {
        return Math.min(harts - osReservedHarts, maxThreadsPerProcess);
    }

    /** DPA cores: the partition's EUs over EUs per core. */
    public int cores() {
        return harts / hartsPerCore;
    }

    /**
     * Reads the block through {@code ctx} ({@code w} names the DOCA call in errors).
     *
     * @throws DocaException NOT_SUPPORTED (no DPA, or one without single-EU affinity), DRIVER (the
     *         query was refused otherwise: FlexIO's message)
     */
    static DocaDpaCaps query(String w, IbvContext ctx) {
        FlexioHcaCaps c;
        try {
            c = FlexioHcaCaps.query(ctx);
        } catch (FlexioException e) {
            throw DocaDpa.flexio(w, e);
        }
        DocaException.check(c.dpa(), DocaError.DOCA_ERROR_NOT_SUPPORTED, w + ": the device reports no DPA capabilities");
        DocaException.check(c.singleHartAffinity() && c.hartsPerCore() <= c.harts(), DocaError.DOCA_ERROR_NOT_SUPPORTED,
                w + ": the DPA reports no single-EU thread affinity, or " + c.hartsPerCore() + " EUs per core of " + c.harts());
        return new DocaDpaCaps(c.harts(), c.hartsPerCore(), c.osReservedHarts(), c.kernelMaxRunTime(), c.maxThreadsPerProcess());
    }

    /**
     * {@code doca_dpa_cap_is_supported(devinfo)}: whether the device reports a DPA (a context is
     * opened in the devinfo's process for the query, and closed).
     *
     * @throws DocaException INVALID_VALUE (null), DRIVER (the device could not be asked)
     */
    public static boolean capIsSupported(DocaDevinfo devinfo) {
        String w = "doca_dpa_cap_is_supported";
        DocaException.check(devinfo != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null devinfo");
        try (IbvContext c = devinfo.ibvDevice().open(devinfo.process())) {
            return supported(w, c);
        } catch (KernelException e) {
            throw DocaException.ofErrno(w + " on " + devinfo.getIbdevName(), e);
        }
    }

    static boolean supported(String w, IbvContext c) {
        try {
            query(w, c);
            return true;
        } catch (DocaException e) {
            if (e.error() == DocaError.DOCA_ERROR_NOT_SUPPORTED) {
                return false;
            }
            throw e;
        }
    }
}
