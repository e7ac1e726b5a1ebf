package org.peerdirect.doca.dpa;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;

/**
 * {@code struct doca_dpa_eu_affinity}: the one EU a DPA thread is pinned to (strict affinity, as
 * DOCA's {@code dpa_nvqual} sample pins one thread per EU). An EU outside the partition, or one of
 * the RTOS's reserved EUs, is refused when the thread starts (the firmware's BAD_PARAM, as
 * DOCA_ERROR_DRIVER with its message).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_eu_affinity_create, _set, _clear, _destroy</a>
 */
public final class DocaDpaEuAffinity {

    private int euId = -1;
    private boolean destroyed;

    private DocaDpaEuAffinity() {
    }

    /** {@code doca_dpa_eu_affinity_create}: no EU yet. */
    public static DocaDpaEuAffinity create(DocaDpa dpa) {
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_dpa_eu_affinity_create: null DPA");
        return new DocaDpaEuAffinity();
    }

    /** {@code doca_dpa_eu_affinity_set}: pins to {@code euId}. */
    public void set(int euId) {
        check("doca_dpa_eu_affinity_set");
        DocaException.check(euId >= 0, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_dpa_eu_affinity_set: EU id " + euId);
        this.euId = euId;
    }

    /** {@code doca_dpa_eu_affinity_clear}. */
    public void clear() {
        check("doca_dpa_eu_affinity_clear");
        euId = -1;
    }

    /** {@code doca_dpa_eu_affinity_get}: the EU, or -1 when none is set. */
    public int get() {
        check("doca_dpa_eu_affinity_get");
        return euId;
    }

    /** {@code doca_dpa_eu_affinity_destroy}; INVALID_VALUE the second time. */
    public void destroy() {
        check("doca_dpa_eu_affinity_destroy");
        destroyed = true;
    }

    private void check(String w) {
        DocaException.check(!destroyed, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the affinity was destroyed");
    }
}
