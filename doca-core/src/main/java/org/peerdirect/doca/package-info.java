/**
 * DOCA Core's common types ({@code doca_error.h}, {@code doca_types.h}): {@link
 * org.peerdirect.doca.DocaError} ({@code doca_error_t}), {@link org.peerdirect.doca.DocaException},
 * {@link org.peerdirect.doca.DocaAccessFlag} and the seam to DOCA DPA, {@link
 * org.peerdirect.doca.DocaDpaContext}. Like DOCA's, the objects of this library are not
 * thread-safe unless a method says otherwise: one thread configures, starts and destroys an object.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/DOCA+Core">DOCA Core</a>
 */
@Export
@Version("0.5.0")
package org.peerdirect.doca;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
