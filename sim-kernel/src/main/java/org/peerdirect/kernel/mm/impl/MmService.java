package org.peerdirect.kernel.mm.impl;

import java.nio.file.Path;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
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
@Designate(ocd = MmService.Config.class)
public final class MmService extends Mm {

    @ObjectClassDefinition(name = "sim-kernel memory manager",
            description = "Physical memory, swap and process limits of the simulated kernel. A change re-creates the memory manager (every process ends).")
    @interface Config {
        @AttributeDefinition(min = "16777216", max = "68719476736",
                description = "physical memory in bytes (16 MiB to 64 GiB, rounded down to 4 KiB); untouched memory costs the host nothing")
        long memory_size() default 1L << 30;

        @AttributeDefinition(description = "fill freed frames with a poison pattern (catches use after free)")
        boolean poison() default true;

        @AttributeDefinition(min = "0", max = "68719476736", description = "swap space in bytes (0 to 64 GiB)")
        long swap_size() default 256L << 20;

        @AttributeDefinition(required = false, description = "swap file path; empty: a file in java.io.tmpdir, unlinked once open")
        String swap_file() default "";

        @AttributeDefinition(min = "0", max = "1099511627776", description = "RLIMIT_MEMLOCK of new processes in bytes (0 to 1 TiB)")
        long memlock() default 8L << 20;

        @AttributeDefinition(min = "301", max = "4194304", description = "kernel.pid_max: pids stay below it (301 to 4194304)")
        int pid_max() default Mm.PID_MAX_DEFAULT;
    }

    @Activate
    public MmService(Config c, BundleContext ctx) {
        super(c.memory_size() & -Mm.PAGE_SIZE, c.poison(), swapFile(c, ctx), c.swap_size());
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
