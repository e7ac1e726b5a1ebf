package org.peerdirect.ib.core.umem;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.kernel.mm.MmuNotifierRange;

/**
 * The driver's {@code mmu_interval_notifier_ops.invalidate} for an ODP umem (mlx5's
 * {@code mlx5_ib_invalidate_range}): called before the pages of {@code range} (clipped to the
 * umem by the caller's reading of it) change in the process, with the mmap lock held. Before it
 * returns the device must not touch them: take the umem mutex, {@link IbUmemOdp#setSeq}, zap the
 * device's translation and wait for DMA in flight, {@link IbUmemOdp#unmapDmaPages}, unlock.
 * It must not fault or walk the process's memory (the mmap lock is held).
 */
@ConsumerType
@FunctionalInterface
public interface UmemOdpInvalidate {

    /**
     * The invalidation of a device that keeps no translation of its own to zap (rxe's
     * {@code rxe_ib_invalidate_range}): lock, set the sequence, unmap, unlock.
     */
    UmemOdpInvalidate UNMAP_ONLY = (umem, range, curSeq) -> {
        umem.lock();
        try {
            umem.setSeq(curSeq);
            umem.unmapDmaPages(range.start(), range.end());
        } finally {
            umem.unlock();
        }
        return true;
    };

    /** @return true (false only if it could not block; not used yet) */
    boolean invalidate(IbUmemOdp umem, MmuNotifierRange range, long curSeq);
}
