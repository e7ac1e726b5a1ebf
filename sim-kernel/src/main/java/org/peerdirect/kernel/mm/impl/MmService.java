package org.peerdirect.kernel.mm.impl;

import java.nio.file.Path;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.peerdirect.kernel.config.impl.ConfigCommands;
import org.peerdirect.kernel.mm.Mm;

/**
 * The memory manager service. Configuration PID {@code org.peerdirect.kernel.mm}:
 * {@code memory.size} (bytes, default 1 GiB), {@code poison} (fill freed frames, default true),
 * {@code swap.size} (default 256 MiB), {@code swap.file} (default a file in java.io.tmpdir,
 * unlinked once open), {@code memlock} (default RLIMIT_MEMLOCK of new processes, 8 MiB),
 * {@code pid.max} (kernel.pid_max, default 32768). The limits apply at once; memory and swap at the
 * next start ({@link #modified}).
 * Untouched memory costs the host nothing (MAP_NORESERVE).
 */
@Component(immediate = true, // holds state: a delayed component would be disposed when unused
        service = Mm.class, configurationPid = "org.peerdirect.kernel.mm")
@Designate(ocd = MmService.Config.class)
public final class MmService extends Mm {

    @ObjectClassDefinition(name = "sim-kernel memory manager",
            description = "Physical memory, swap and process limits of the simulated kernel. memlock and pid.max apply at once; memory.size, poison, "
                    + "swap.size and swap.file are fixed at boot (the kernel's mem= and swapon) and apply at the next start of the memory manager.")
    @interface Config {
        @AttributeDefinition(min = "16777216", max = "68719476736",
                description = "physical memory in bytes (16 MiB to 64 GiB, rounded down to 4 KiB); untouched memory costs the host nothing; " + ConfigCommands.AT_NEXT_START)
        long memory_size() default 1L << 30;

        @AttributeDefinition(description = "fill freed frames with a poison pattern (catches use after free); " + ConfigCommands.AT_NEXT_START)
        boolean poison() default true;

        @AttributeDefinition(min = "0", max = "68719476736", description = "swap space in bytes (0 to 64 GiB); " + ConfigCommands.AT_NEXT_START)
        long swap_size() default 256L << 20;

        @AttributeDefinition(required = false, description = "swap file path; empty: a file in java.io.tmpdir, unlinked once open; " + ConfigCommands.AT_NEXT_START)
        String swap_file() default "";

        @AttributeDefinition(min = "0", max = "1099511627776", description = "RLIMIT_MEMLOCK of new processes in bytes (0 to 1 TiB)")
        long memlock() default 8L << 20;

        @AttributeDefinition(min = "301", max = "4194304", description = "kernel.pid_max: pids stay below it (301 to 4194304)")
        int pid_max() default Mm.PID_MAX_DEFAULT;
    }

    /** The boot-time values this memory manager was built with. */
    private final Config boot;

    @Activate
    public MmService(Config c, BundleContext ctx) {
        super(c.memory_size() & -Mm.PAGE_SIZE, c.poison(), swapFile(c, ctx), c.swap_size());
        this.boot = c;
        setDefaultMemlock(c.memlock());
        setPidMax(c.pid_max());
    }

    /**
     * A configuration delivered to the running memory manager: the limits apply at once (new
     * processes get the memlock limit, new pids stay below pid.max, as the sysctl), the boot-time
     * values are kept for the next start, and nothing is re-created. Before, every delivery (even
     * the guard putting back a rejected value) re-created the memory manager: every process ended
     * and everything built on it restarted.
     */
    @Modified
    void modified(Config c) {
        setDefaultMemlock(c.memlock());
        setPidMax(c.pid_max());
        if ((c.memory_size() & -Mm.PAGE_SIZE) != (boot.memory_size() & -Mm.PAGE_SIZE) || c.poison() != boot.poison()
                || c.swap_size() != boot.swap_size() || !c.swap_file().equals(boot.swap_file())) {
            System.getLogger("org.peerdirect.kernel.mm").log(System.Logger.Level.INFO, "org.peerdirect.kernel.mm: memory.size, poison, "
                    + "swap.size and swap.file are fixed at boot: the new values apply at the next start of the memory manager");
        }
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
