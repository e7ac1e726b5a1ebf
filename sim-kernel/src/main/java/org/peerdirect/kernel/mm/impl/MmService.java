package org.peerdirect.kernel.mm.impl;

import java.nio.file.Path;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.peerdirect.kernel.mm.Mm;

/**
 * The memory manager service. Configuration PID {@code org.peerdirect.kernel.mm}:
 * {@code memory.size} (bytes, default 1 GiB), {@code poison} (fill freed frames, default true),
 * {@code swap.size} (default 256 MiB), {@code swap.file} (default a file in java.io.tmpdir,
 * unlinked once open), {@code memlock} (default RLIMIT_MEMLOCK of new processes, 8 MiB),
 * {@code pid.max} (kernel.pid_max, default 32768).
 * Untouched memory costs the host nothing (MAP_NORESERVE).
 */
@Component(immediate = true, // holds state: a delayed component would be disposed when unused
        service = Mm.class, configurationPid = "org.peerdirect.kernel.mm")
public final class MmService extends Mm {

    @interface Config {
        long memory_size() default 1L << 30;

        boolean poison() default true;

        long swap_size() default 256L << 20;

        String swap_file() default "";

        long memlock() default 8L << 20;

        int pid_max() default Mm.PID_MAX_DEFAULT;
    }

    @Activate
    public MmService(Config c, BundleContext ctx) {
        super(c.memory_size(), c.poison(), swapFile(c, ctx), c.swap_size());
        setDefaultMemlock(c.memlock());
        setPidMax(c.pid_max());
    }

    private static Path swapFile(Config c, BundleContext ctx) {
        if (!c.swap_file().isBlank()) {
            return Path.of(c.swap_file());
        }
        return Path.of(System.getProperty("java.io.tmpdir"),
                "peerdirect-swap-" + ProcessHandle.current().pid() + "-" + ctx.getBundle().getBundleId() + "-" + System.nanoTime());
    }

    @Deactivate
    void deactivate() {
        close();
    }
}
