/**
 * The ConnectX-3 personality: PCI functions {@code 15b3:1003} on the simulated PCI bus, each with
 * a transport engine, and the firmware interface a driver ({@code mlx4-provider}) reaches through
 * its function: {@code fn.firmware(ConnectX3.class)}.
 */
@Export
@Version("0.2.0")
package org.peerdirect.hca.cx3;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
