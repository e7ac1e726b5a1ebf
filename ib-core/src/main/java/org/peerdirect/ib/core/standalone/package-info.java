/**
 * The IB core without OSGi, for plain JUnit tests and tools that build a machine by hand: the
 * peer-memory registry, the umem service and device registration that the bundle's components
 * publish as services. {@code org.peerdirect.testkit}'s machine builder is built on it.
 */
@Export
@Version("0.1.0")
package org.peerdirect.ib.core.standalone;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
