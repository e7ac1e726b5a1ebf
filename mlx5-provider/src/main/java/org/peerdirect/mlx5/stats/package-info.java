/**
 * What mlx5_core shows of each device, read-only, for tools outside the driver (the web console):
 * the recent firmware commands ({@code mlx5:cmdlog}), the firmware pages ({@code mlx5:pages}) and
 * the event queues ({@code mlx5:eqs}). One {@link org.peerdirect.mlx5.stats.Mlx5CoreStats}
 * service per device, registered while the device is bound.
 */
@Export
@Version("0.1.0")
package org.peerdirect.mlx5.stats;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
