package org.peerdirect.peermem;

/**
 * A snapshot of one client's statistics, with the kernel's sysfs names
 * ({@code /sys/kernel/infiniband/memory_peers/<name>/}):
 *
 * @param version          {@code version}: the client's version string
 * @param numAllocMrs      {@code num_alloc_mrs}: +1 per registration whose {@code dmaMap} succeeded
 * @param numDeallocMrs    {@code num_dealloc_mrs}: +1 when a registration leaves the mapped state
 *                         (deregistered or invalidated)
 * @param numRegPages      {@code num_reg_pages}: DMA-mapped scatter entries ({@code nmap}), not
 *                         4 KiB pages
 * @param numDeregPages    {@code num_dereg_pages}: the same entries, added when the registration
 *                         reaches the unmapped state. The correct 5.1–5.4 behaviour: OFED 5.5+
 *                         zeroes the table first and so never grows this counter
 * @param numRegBytes      {@code num_reg_bytes}: the registrations' user lengths
 * @param numDeregBytes    {@code num_dereg_bytes}: added with {@code num_dereg_pages}
 * @param numFreeCallbacks {@code num_free_callbacks}: calls of the invalidation callback,
 *                         including stale or unknown tickets
 */
public record PeerMemoryStatistics(String version, long numAllocMrs, long numDeallocMrs, long numRegPages,
        long numDeregPages, long numRegBytes, long numDeregBytes, long numFreeCallbacks) {
}
