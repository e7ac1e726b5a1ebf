package org.peerdirect.kernel.module.impl;

import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleException;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.module.KernelModule;

/**
 * {@code kernel:lsmod}, {@code kernel:rmmod <name>}, {@code kernel:modprobe <name>}: the module
 * tools over the bundles that loaded a module. rmmod refuses a module in use (EBUSY, as
 * {@code delete_module} does) and otherwise stops its bundle; stopping a bundle by other means
 * ({@code felix:stop}) is {@code rmmod --force}: the bundle's own teardown then waits for its users.
 */
@Component(service = ModuleCommands.class, property = {"osgi.command.scope=kernel", "osgi.command.function=lsmod",
        "osgi.command.function=rmmod", "osgi.command.function=modprobe"})
public final class ModuleCommands {

    private final ModuleTable table;

    @Activate
    public ModuleCommands(@Reference ModuleTable table) {
        this.table = table;
    }

    @Descriptor("the loaded modules with their reference counts, as lsmod")
    public String lsmod() {
        List<String> out = new ArrayList<>();
        out.add(String.format("%-24s %8s  %-6s %s", "Module", "Used by", "State", "Bundle"));
        for (ModuleTable.Loaded l : table.loaded()) {
            out.add(String.format("%-24s %8d  %-6s %s", l.module().name(), l.module().refcount(), l.module().state(),
                    ModuleTable.describe(l.bundle())));
        }
        return String.join("\n", out);
    }

    @Descriptor("unloads a module (stops its bundle); refused with EBUSY while it is in use. Example: kernel:rmmod nvidia_peermem")
    public String rmmod(@Descriptor("module name, as kernel:lsmod shows it") String name) {
        ModuleTable.Loaded l = table.find(name);
        if (l == null) {
            throw new KernelException(Errno.ENOENT, "rmmod: ERROR: Module " + name + " is not currently loaded");
        }
        KernelModule m = l.module();
        if (!m.tryStop()) {
            throw new KernelException(Errno.EBUSY, "rmmod: ERROR: Module " + name + " is in use"
                    + (m.state() == KernelModule.State.GOING ? " (being removed)" : " (" + m.refcount() + " references: deregister the MRs over it first)"));
        }
        try {
            l.bundle().stop();
        } catch (BundleException | IllegalStateException | SecurityException e) {
            m.stopFailed();
            throw new KernelException(Errno.EIO, "rmmod: ERROR: Module " + name + ": stopping " + ModuleTable.describe(l.bundle())
                    + " failed: " + e.getMessage(), e);
        }
        return "rmmod: " + name + " unloaded (" + ModuleTable.describe(l.bundle()) + " stopped)";
    }

    @Descriptor("loads a module again (starts the bundle that is it). Example: kernel:modprobe nvidia_peermem")
    public String modprobe(@Descriptor("module name") String name) {
        if (table.find(name) != null) {
            return "modprobe: " + name + " is loaded";
        }
        Bundle b = table.known(name);
        if (b == null || b.getState() == Bundle.UNINSTALLED) {
            throw new KernelException(Errno.ENOENT, "modprobe: FATAL: Module " + name + " not found");
        }
        try {
            b.start();
        } catch (BundleException e) {
            throw new KernelException(Errno.EIO, "modprobe: ERROR: could not insert '" + name + "': " + e.getMessage(), e);
        }
        if (table.find(name) == null) {
            throw new KernelException(Errno.EIO, "modprobe: ERROR: could not insert '" + name + "': " + ModuleTable.describe(b)
                    + " started but loaded no module (its component is not satisfied: see scr:list)");
        }
        return "modprobe: " + name + " loaded";
    }
}
