/**
 * DOCA Core's memory map ({@code doca_mmap.h}): {@link org.peerdirect.doca.mmap.DocaMmap} registers
 * one range of the process on its devices as verbs MRs and exports it ({@link
 * org.peerdirect.doca.mmap.MmapExportDesc}) for a peer to import and reach by RDMA. The DPA range
 * form waits for DOCA DPA on FlexIO. Not thread-safe.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/DOCA+Core">DOCA Core</a>
 */
@Export
@Version("0.2.0")
package org.peerdirect.doca.mmap;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
