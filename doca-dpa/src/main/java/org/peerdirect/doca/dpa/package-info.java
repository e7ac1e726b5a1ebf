/**
 * DOCA DPA's host library ({@code libdoca_dpa}: {@code doca_dpa.h}) on FlexIO, in the user's
 * process: {@link org.peerdirect.doca.dpa.DocaDpa} ({@code struct doca_dpa}: create on a
 * BlueField-3, set_app, start, stop, destroy; mem_alloc, mem_free, memset, h2d_memcpy,
 * d2h_memcpy; rpc; kernel_launch_update_set/_add with sync events; the DPA memory of sync events
 * with a DPA subscriber), {@link org.peerdirect.doca.dpa.DocaDpaThread},
 * {@link org.peerdirect.doca.dpa.DocaDpaEuAffinity},
 * {@link org.peerdirect.doca.dpa.DocaDpaNotificationCompletion} and {@link org.peerdirect.doca.dpa.DocaDpaCompletion}
 * (completion contexts, a FlexIO DPA_THREAD CQ underneath); the resource queries from the DPA
 * capability block ({@link org.peerdirect.doca.dpa.DocaDpaCaps}) and thread groups
 * ({@link org.peerdirect.doca.dpa.DocaDpaThreadGroup}). Status is {@code doca_error_t}
 * ({@link org.peerdirect.doca.DocaException}); as DOCA documents, the objects are not thread-safe.
 * The device side is {@code org.peerdirect.doca.dpa.dev} (doca-dpa-dev).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">DOCA DPA</a>
 */
@Export
@Version("0.2.0")
package org.peerdirect.doca.dpa;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
