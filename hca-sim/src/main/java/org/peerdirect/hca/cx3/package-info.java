/**
 * The ConnectX-3 personality: boards whose PCI functions ({@code 15b3:1003}) carry the HCR
 * command interface, UAR and BlueFlame pages and MSI-X; the byte layouts a driver and libmlx4
 * write are in {@link org.peerdirect.hca.cx3.ifc}. A driver reaches the device only through its
 * PCI function.
 */
@Export
@Version("0.6.0")
package org.peerdirect.hca.cx3;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
