/**
 * Simulated memory management ({@code mm/}): physical frames with a buddy allocator, process
 * address spaces with VMAs and 4-level page tables, CPU access with faults, pinning
 * ({@code pin_user_pages}), MMU interval notifiers with the sequence protocol, and
 * {@code hmm_range_fault}.
 *
 * <p>Not modelled: {@code fork} (no copy-on-write between processes; every anonymous page has
 * exactly one mapping), shared anonymous memory, file-backed mappings (planned), THP collapse.
 */
@Export
@Version("0.1.0")
package org.peerdirect.kernel.mm;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
