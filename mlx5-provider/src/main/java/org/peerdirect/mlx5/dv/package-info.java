/**
 * libmlx5's direct verbs for DevX ({@code mlx5dv.h}'s {@code mlx5dv_devx_*}): objects made by PRM
 * commands the caller builds (with {@code org.peerdirect.hca.cx4.ifc}'s layouts), umems over the
 * process's memory, UARs and event channels of a context's uid; what FlexIO is built on. Each call
 * is one driver method of the context ({@code IbvContext.driverMethod}).
 */
@Export
@Version("0.2.0")
package org.peerdirect.mlx5.dv;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
