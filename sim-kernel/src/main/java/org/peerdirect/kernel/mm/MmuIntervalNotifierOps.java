package org.peerdirect.kernel.mm;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * {@code struct mmu_interval_notifier_ops}. The callback runs before the page-table entries of
 * the range change and before any of its frames is freed or reused. It must stop all device
 * access to the range before it returns, and it must call
 * {@link MmuIntervalNotifier#setSeq(long)} with {@code curSeq} under the same lock its fault path
 * uses for {@link MmuIntervalNotifier#readRetry(long)}.
 *
 * <p>It is called with the address space's mmap lock held (for munmap, mprotect, madvise,
 * migration, reclaim): it must not call back into that address space (no faults, no
 * hmm_range_fault), and must not wait for a thread that does.
 */
@ConsumerType
@FunctionalInterface
public interface MmuIntervalNotifierOps {
    /** @return true; false only when it could not block and the caller must retry (not used yet) */
    boolean invalidate(MmuIntervalNotifier notifier, MmuNotifierRange range, long curSeq);
}
