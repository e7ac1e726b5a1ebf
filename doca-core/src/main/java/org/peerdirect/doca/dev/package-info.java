/**
 * DOCA Core's device handling ({@code doca_dev.h}): {@link org.peerdirect.doca.dev.DocaDevinfo}
 * lists a process's local devices over the verbs device list and finds one by ibdev name or PCI
 * address; {@link org.peerdirect.doca.dev.DocaDev} opens it (a verbs context and a PD). Not
 * thread-safe.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/DOCA+Core">DOCA Core</a>
 */
@Export
@Version("0.2.0")
package org.peerdirect.doca.dev;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
