/**
 * A read-only view of the mlx4 devices for a console: each ConnectX-3's recent HCR commands
 * ({@code mlx4:cmdlog}) and the DMA pages its driver holds ({@code mlx4:pages}). Reading it sends
 * no firmware command.
 */
@Export
@Version("0.1.0")
package org.peerdirect.mlx4.stats;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
