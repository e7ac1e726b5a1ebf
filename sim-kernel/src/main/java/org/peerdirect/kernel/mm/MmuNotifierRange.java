package org.peerdirect.kernel.mm;

/**
 * The range an invalidation covers ({@code struct mmu_notifier_range}): [start, end), page
 * aligned, and why.
 */
public record MmuNotifierRange(AddressSpace mm, long start, long end, MmuNotifierEvent event) {
}
