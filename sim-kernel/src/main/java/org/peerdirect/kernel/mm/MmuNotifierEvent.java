package org.peerdirect.kernel.mm;

/** Why an invalidation runs ({@code enum mmu_notifier_event}). */
public enum MmuNotifierEvent {
    /** munmap: the range is gone for good. */
    UNMAP,
    /** the pages are cleared but the VMA stays: reclaim, swap-out, madvise(DONTNEED/PAGEOUT). */
    CLEAR,
    /** mprotect changed the protection. */
    PROTECTION_VMA,
    /** pages move to other frames. */
    MIGRATE,
    /** the whole address space is being torn down (process exit). */
    RELEASE
}
