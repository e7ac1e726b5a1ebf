/**
 * DPA programs in Java, DPACC's attributes: {@link org.peerdirect.dpacc.DpaApp},
 * {@link org.peerdirect.dpacc.DpaGlobal} ({@code __dpa_global__}) and
 * {@link org.peerdirect.dpacc.DpaRpc} ({@code __dpa_rpc__}). Device code compiles against them
 * (class retention, nothing at run time); {@code dpacc}'s processor and packager act on them.
 */
@Export
@Version("0.1.0")
package org.peerdirect.dpacc;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
