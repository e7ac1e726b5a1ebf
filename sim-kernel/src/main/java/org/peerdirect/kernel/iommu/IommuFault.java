package org.peerdirect.kernel.iommu;

/** A DMA the IOMMU refused; nothing was read or written. */
public class IommuFault extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Why. */
    public enum Kind {
        /** no mapping at that I/O virtual address (an ordinary IOMMU page fault). */
        NOT_MAPPED,
        /** the mapping's direction does not allow this access. */
        PERMISSION,
        /** the frame behind the mapping was freed after it was mapped: a use-after-free, a bug. */
        USE_AFTER_FREE
    }

    private final Kind kind;
    private final String domain;
    private final long iova;

    public IommuFault(Kind kind, String domain, long iova, String message) {
        super(String.format("IOMMU %s fault in domain %s at iova 0x%x: %s", kind, domain, iova, message));
        this.kind = kind;
        this.domain = domain;
        this.iova = iova;
    }

    public Kind kind() {
        return kind;
    }

    public String domain() {
        return domain;
    }

    public long iova() {
        return iova;
    }
}
