package org.peerdirect.kernel.iommu;

/**
 * The audit every test ends with: {@link #clean()} means no use-after-free, no frame freed while
 * mapped, and (when checked at the end) no mapping left behind.
 *
 * @param faults          refused DMAs through missing or read-only mappings (expected in error tests)
 * @param useAfterFree    refused DMAs whose frame was freed since mapping: always a bug
 * @param freedWhileMapped frames freed while an IOMMU mapping pointed at them: always a bug
 * @param liveMappings    pages mapped now, over all domains
 */
public record IommuAudit(long faults, long useAfterFree, long freedWhileMapped, long liveMappings) {

    /** No violation happened. */
    public boolean violationFree() {
        return useAfterFree == 0 && freedWhileMapped == 0;
    }

    /** No violation happened and nothing is mapped any more. */
    public boolean clean() {
        return violationFree() && liveMappings == 0;
    }
}
