/**
 * What users import into their own tests.
 * <ul>
 * <li>{@link org.peerdirect.testkit.Machine}: a machine built for a plain JUnit 5 test (memory,
 * IOMMU, ConnectX-3 models on a fabric, a driver, the IB core); {@code close()} runs the audit (no
 * IOMMU fault or violation, no mapping, no pin, every frame free) and fails the test otherwise.</li>
 * <li>{@link org.peerdirect.testkit.PeerMemoryClientContract}: the peer-memory client contract
 * kit, an abstract JUnit 5 class a client writer extends with a factory for their client.</li>
 * </ul>
 */
@Export
@Version("0.6.0")
package org.peerdirect.testkit;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
