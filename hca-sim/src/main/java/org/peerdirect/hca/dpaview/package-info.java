/**
 * A read-only view of the BlueField-3 DPAs, as a bench or a console looks at them: the DPA
 * capability block, the execution units, the DPA processes and their threads. Hardware and
 * firmware vocabulary only (EU, activation, trigger, CQ armed); nothing here changes the DPA, and
 * reading it costs no firmware command. {@code dpa:caps}, {@code dpa:ps} and {@code dpa:threads}
 * print the same state as text.
 */
@Export
@Version("0.1.0")
package org.peerdirect.hca.dpaview;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
