/**
 * Simulated memory management ({@code mm/}): physical frames with a buddy allocator, process
 * address spaces with VMAs and 4-level page tables, CPU access with faults, pinning
 * ({@code pin_user_pages}), MMU interval notifiers with the sequence protocol, and
 * {@code hmm_range_fault}.
 *
 * <p>Mappings: anonymous private (4 KiB), HUGETLB (2 MiB), shared file mappings on real files
 * (with writeback), and device memory ({@code VM_IO|VM_PFNMAP}).
 *
 * <p>Not modelled: {@code fork} (no copy-on-write between processes; every page has exactly one
 * mapping, so a file mapped twice gets two page caches: map a file region once), shared anonymous
 * memory, private file mappings, transparent huge pages, NUMA nodes (migration moves pages to
 * other frames of the one node).
 */
@Export
@Version("0.11.0")
package org.peerdirect.kernel.mm;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
