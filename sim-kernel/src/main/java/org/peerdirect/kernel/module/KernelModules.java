package org.peerdirect.kernel.module;

import org.osgi.annotation.versioning.ProviderType;

/**
 * The module table as the bundle using it sees it (a bundle-scoped service: each bundle gets its
 * own, so the table knows which bundle a module is). A bundle that stands for a kernel module
 * loads it once and takes and drops references on it; when the bundle releases this service (it
 * stops), its module leaves the table.
 */
@ProviderType
public interface KernelModules {

    /**
     * Loads the calling bundle's module: LIVE, no reference. Loading the same name again from
     * the same bundle returns the module already loaded.
     *
     * @throws org.peerdirect.kernel.mm.KernelException EEXIST when another bundle loaded that
     *         name, or this bundle loaded another name (a bundle is one module); EINVAL for a bad name
     */
    KernelModule load(String name);
}
