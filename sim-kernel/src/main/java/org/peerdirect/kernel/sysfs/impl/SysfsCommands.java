package org.peerdirect.kernel.sysfs.impl;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.sysfs.Sysfs;

/** {@code kernel:sysfs [path]}: the tree below a path with each attribute's value, like {@code grep -r . /sys/...}. */
@Component(service = SysfsCommands.class, property = {"osgi.command.scope=kernel", "osgi.command.function=sysfs"})
public final class SysfsCommands {

    private final Sysfs sysfs;

    @Activate
    public SysfsCommands(@Reference Sysfs sysfs) {
        this.sysfs = sysfs;
    }

    @Descriptor("every sysfs file with its value")
    public String sysfs() {
        return sysfs("");
    }

    @Descriptor("the sysfs files under a path with their values. Example: kernel:sysfs kernel/infiniband/memory_peers")
    public String sysfs(@Descriptor("a path under /sys") String path) {
        StringBuilder sb = new StringBuilder();
        sb.append("# sysfs mirrored at ").append(sysfs.root()).append('\n');
        walk(path.startsWith("/") ? path.substring(1) : path, sb);
        return sb.toString().stripTrailing();
    }

    private void walk(String path, StringBuilder sb) {
        if (!sysfs.exists(path)) {
            throw new org.peerdirect.kernel.shell.UsageException("kernel:sysfs: no such path /sys/" + path + " (kernel:sysfs lists every file)");
        }
        if (!sysfs.isDirectory(path)) {
            sb.append(path).append(':').append(sysfs.read(path));
            return;
        }
        for (String name : sysfs.list(path)) {
            walk(path.isEmpty() ? name : path + "/" + name, sb);
        }
    }
}
