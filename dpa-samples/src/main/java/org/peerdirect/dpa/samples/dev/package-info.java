/**
 * The samples' DPA programs (dpacc's annotations), linked with flexio-dev (and doca-dpa-dev) into
 * images at build time. Exported so that the container's tests run the same device code as the
 * samples and their tests (itest's {@code DocaRdmaIT} runs {@link org.peerdirect.dpa.samples.dev.InitiatorTargetDev}
 * through its generated {@code InitiatorTargetDevStubs}, {@code DocaScenariosIT} {@code PingPongDev} and
 * {@code LitmusDev}, {@code DocaVerbsIT} {@code VerbsInitiatorTargetDev}) instead of copies of them; so do
 * doca-verbs' tests ({@code VerbsInitiatorTargetDev}) and the bench ({@code PingPongDev} in its free-running
 * mode). 0.2.0: {@code VerbsInitiatorTargetDev}; {@code PingPongDev}'s free-running mode.
 */
@Export
@Version("0.2.0")
package org.peerdirect.dpa.samples.dev;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
