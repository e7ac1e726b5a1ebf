package org.peerdirect.kernel.iommu;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.peerdirect.kernel.jfr.KernelEvents;

/**
 * One domain's record of what its device did and was refused ({@code report_iommu_fault} of
 * {@code drivers/iommu/iommu.c}, and the DMA debugging of {@code kernel/dma/debug.c}): faults,
 * use-after-free DMAs, bytes moved, bytes moved to or from another function's BAR. The
 * {@link Iommu}'s audit sums these over its domains; a destroyed domain's use-after-free and BAR
 * bytes are carried over by {@link Iommu#destroyDomain}.
 *
 * <p>Lock-free: every DMA of every queue pair counts here, so the byte counters are
 * {@link LongAdder}s (no single contended word); faults are rare and counted exactly.
 */
final class DomainAudit {

    private final Iommu iommu;
    private final String domain;
    private final AtomicLong faults = new AtomicLong();
    private final AtomicLong useAfterFree = new AtomicLong();
    final LongAdder bytesRead = new LongAdder();
    final LongAdder bytesWritten = new LongAdder();
    /** Bytes this device moved to or from another function's BAR (peer to peer), part of the two above. */
    final LongAdder barBytes = new LongAdder();

    DomainAudit(Iommu iommu, String domain) {
        this.iommu = iommu;
        this.domain = domain;
    }

    /** A refused DMA at {@code iova}: counted here and in the IOMMU, returned for the caller to throw. */
    IommuFault fault(IommuFault.Kind kind, long iova, String msg) {
        if (kind == IommuFault.Kind.USE_AFTER_FREE) {
            useAfterFree.incrementAndGet();
        }
        faults.incrementAndGet();
        iommu.faulted();
        KernelEvents.IommuFault.commit(domain, kind.name(), iova, msg);
        return new IommuFault(kind, domain, iova, msg);
    }

    /**
     * A BAR's memory was freed under a DMA in flight (its function removed between the check and
     * the copy, or its device took an aperture page back): a use-after-free, counted like one.
     */
    IommuFault barGone(long iova) {
        return fault(IommuFault.Kind.USE_AFTER_FREE, iova,
                "a mapped BAR page was freed during the DMA (its function was removed, or its device took the page back)");
    }

    long faults() {
        return faults.get();
    }

    long useAfterFree() {
        return useAfterFree.get();
    }
}
