package org.peerdirect.kernel.module.impl;

import org.osgi.framework.Bundle;
import org.osgi.service.component.ComponentContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ServiceScope;
import org.peerdirect.kernel.module.KernelModule;
import org.peerdirect.kernel.module.KernelModules;

/**
 * {@link KernelModules} for one using bundle (bundle scope: DS makes one per bundle and drops it
 * when the bundle lets go, i.e. stops): loads into the {@link ModuleTable} under that bundle and
 * unloads when dropped.
 */
@Component(service = KernelModules.class, scope = ServiceScope.BUNDLE)
public final class BundleKernelModules implements KernelModules {

    private final ModuleTable table;
    private final Bundle bundle;

    @Activate
    public BundleKernelModules(@Reference ModuleTable table, ComponentContext context) {
        this.table = table;
        this.bundle = context.getUsingBundle();
    }

    @Override
    public KernelModule load(String name) {
        return table.load(bundle, name);
    }

    /** Idempotent: unloading a bundle with no module changes nothing. */
    @Deactivate
    void deactivate() {
        table.unload(bundle);
    }
}
