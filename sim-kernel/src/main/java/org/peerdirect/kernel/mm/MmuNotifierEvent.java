package org.peerdirect.kernel.mm;

/** Why an invalidation runs ({@code enum mmu_notifier_event}). */
public enum MmuNotifierEvent {
    /** munmap: the range is gone for good. */
    UNMAP,
    /** the pages are cleared but the VMA stays: reclaim, swap-out, madvise(DONTNEED/PAGEOUT). */
    CLEAR,
    /** mprotect changed the protection. */
    PROTECTION_VMA,
    /**
     * writeback write-protected and cleaned pages ({@code msync}): the mapping and the frames stay,
     * but a device must drop its writable mapping so that its next write faults and re-dirties the
     * page, as the CPU's does.
     *
     * @see "MMU_NOTIFY_PROTECTION_PAGE, page_vma_mkclean_one() in mm/rmap.c"
     */
    PROTECTION_PAGE,
    /** pages move to other frames. */
    MIGRATE,
    /** the whole address space is being torn down (process exit). */
    RELEASE
}
