/**
 * sysfs: a tree of named attributes that bundles publish into, mirrored as plain files under a
 * root folder so {@code cat <root>/kernel/infiniband/memory_peers/<name>/num_alloc_mrs} works as
 * on Linux.
 */
@Export
@Version("0.3.0")
package org.peerdirect.kernel.sysfs;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
