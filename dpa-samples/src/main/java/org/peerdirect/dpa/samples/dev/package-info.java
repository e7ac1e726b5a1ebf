/**
 * The samples' DPA programs (dpacc's annotations), linked with flexio-dev (and doca-dpa-dev) into
 * images at build time. Exported so that the container's tests run the same device code as the
 * samples and their tests (itest's {@code DocaRdmaIT} runs {@link org.peerdirect.dpa.samples.dev.InitiatorTargetDev}
 * through its generated {@code InitiatorTargetDevStubs}, {@code DocaScenariosIT} {@code PingPongDev} and
 * {@code LitmusDev}) instead of copies of them.
 */
@Export
@Version("0.1.0")
package org.peerdirect.dpa.samples.dev;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
