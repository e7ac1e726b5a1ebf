package org.peerdirect.kernel.module.impl;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.osgi.framework.Bundle;
import org.osgi.service.component.annotations.Component;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.module.KernelModule;

/**
 * The kernel's module list: which bundle loaded which module. Kept after a module is unloaded is
 * the bundle that stands for its name, so {@code modprobe} can load it again (the {@code .ko} on
 * disk). Lock: the table's monitor guards both maps; nothing is called out while it is held.
 */
@Component(service = ModuleTable.class)
public final class ModuleTable {

    /** A loaded module and the bundle it is. */
    public record Loaded(KernelModule module, Bundle bundle) {
    }

    /** Guarded by this: name → the module loaded now. */
    private final Map<String, Loaded> loaded = new HashMap<>();
    /** Guarded by this: name → the bundle that loaded it last (loaded or not). */
    private final Map<String, Bundle> known = new HashMap<>();

    /** {@code load_module} for {@code bundle}: see {@link org.peerdirect.kernel.module.KernelModules#load}. */
    public synchronized KernelModule load(Bundle bundle, String name) {
        Loaded l = loaded.get(name);
        if (l != null) {
            if (l.bundle() == bundle) {
                return l.module();
            }
            throw new KernelException(Errno.EEXIST, "module " + name + " is loaded already, by " + describe(l.bundle()));
        }
        for (Loaded other : loaded.values()) {
            if (other.bundle() == bundle) {
                throw new KernelException(Errno.EEXIST, describe(bundle) + " is module " + other.module().name() + " already, not also " + name);
            }
        }
        KernelModule m = new KernelModule(name);
        loaded.put(name, new Loaded(m, bundle));
        known.put(name, bundle);
        return m;
    }

    /** The bundle let go of the table (it stopped): its module is unloaded. */
    public synchronized void unload(Bundle bundle) {
        loaded.values().removeIf(l -> l.bundle() == bundle);
    }

    public synchronized List<Loaded> loaded() {
        List<Loaded> all = new ArrayList<>(loaded.values());
        all.sort((a, b) -> a.module().name().compareTo(b.module().name()));
        return all;
    }

    /** The loaded module of that name, or null. */
    public synchronized Loaded find(String name) {
        return loaded.get(name);
    }

    /** The bundle that loaded that name last, or null when none ever did. */
    public synchronized Bundle known(String name) {
        return known.get(name);
    }

    static String describe(Bundle b) {
        return b.getSymbolicName() + " [" + b.getBundleId() + "]";
    }
}
