/**
 * The ConnectX-3 personality: boards whose PCI functions ({@code 15b3:1003}) carry the HCR
 * command interface, UAR pages and MSI-X; the byte layouts a driver writes are in
 * {@link org.peerdirect.hca.cx3.ifc}.
 */
@Export
@Version("0.5.0")
package org.peerdirect.hca.cx3;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
