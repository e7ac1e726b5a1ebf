/**
 * What a lab needs of HCA boards from outside their silicon: the {@link org.peerdirect.hca.boards.Fabric}
 * the boards are plugged into (the subnet that links their ports in one JVM) and a
 * {@link org.peerdirect.hca.boards.SiliconView} of a board's silicon (resource counts, the
 * transport's error counters, the QP contexts, and a port's cable, the one thing a test bench
 * does to a board). Hardware vocabulary only; the transport engine behind both is private to the
 * bundle. The boards themselves are built by their personalities ({@code ConnectX3Board.onFabric},
 * the ConnectX-4+ device), which take a fabric.
 */
@Export
@Version("0.1.0")
package org.peerdirect.hca.boards;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
