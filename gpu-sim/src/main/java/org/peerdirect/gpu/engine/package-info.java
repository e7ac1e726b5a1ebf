/**
 * What the GPU's resource manager reaches of the board besides its BARs: the firmware interface
 * ({@link org.peerdirect.gpu.engine.GpuEngine}: video memory pages, the BAR1 page table, the copy
 * engine), as a real driver talks to the GSP. Implemented by the model, used by {@code nvidia.ko}.
 */
@Export
@Version("0.1.0")
package org.peerdirect.gpu.engine;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
