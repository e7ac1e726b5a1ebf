package org.peerdirect.kernel.sysfs.impl;

import java.nio.file.Path;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;
import org.peerdirect.kernel.config.impl.ConfigCommands;
import org.peerdirect.kernel.sysfs.Sysfs;

/**
 * The sysfs service. Configuration PID {@code org.peerdirect.kernel.sysfs}:
 * <ul>
 * <li>{@code root}: mirror folder; default the framework property {@code peerdirect.sysfs.root}
 * (the launcher sets {@code launcher/target/peerdirect/sys}), else
 * {@code ${java.io.tmpdir}/peerdirect-sys};</li>
 * <li>{@code mirror.interval.ms}: how often files are refreshed and user writes picked up (200); an
 * on-demand attribute's file (a counter) only when someone read it ({@link SysfsTree#refresh}).</li>
 * </ul>
 * A new configuration is taken in place: the interval at once, the root at the next start (the
 * tree's mirror stays where it is). The service is never re-created by a delivery: every driver
 * and core component holds a reference to it, so a re-creation (which an unchanged delivery, such
 * as the one after the guard put back a rejected value, used to cause) restarted all of them.
 * The mirror is removed when the service goes away, as sysfs disappears with its kernel, unless
 * {@link #freezeMirror} kept it as a snapshot.
 */
@Component(immediate = true, // holds state: a delayed component would be disposed when unused
        service = Sysfs.class, configurationPid = "org.peerdirect.kernel.sysfs")
@Designate(ocd = SysfsService.Config.class)
public final class SysfsService extends SysfsTree {

    @ObjectClassDefinition(name = "sim-kernel sysfs",
            description = "The sysfs tree and its mirror on the host file system")
    @interface Config {
        // "applies at the next start": the suffix peerdirect:config reads (ConfigCommands.AT_NEXT_START)
        @AttributeDefinition(required = false, description = "mirror folder; empty: the container's sys folder; " + ConfigCommands.AT_NEXT_START)
        String root() default "";

        @AttributeDefinition(min = "10", max = "60000", description = "milliseconds between mirror updates (10 to 60000)")
        long mirror_interval_ms() default 200;
    }

    private final ScheduledExecutorService mirror;
    private final Logger logger;
    /** Guarded by this: the periodic sync and its interval. */
    private ScheduledFuture<?> syncing;
    private long every;

    @Activate
    public SysfsService(Config config, BundleContext context,
            @Reference(service = LoggerFactory.class) Logger logger) {
        super(root(config, context), logger::warn);
        this.logger = logger;
        sync();
        mirror = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "sysfs-mirror");
            t.setDaemon(true);
            return t;
        });
        synchronized (this) {
            schedule(config.mirror_interval_ms());
        }
    }

    /** The interval at once (the next sync runs one new interval from now); a new root at the next start. */
    @Modified
    synchronized void modified(Config config, BundleContext context) {
        if (Math.max(10, config.mirror_interval_ms()) != every) {
            syncing.cancel(false);
            schedule(config.mirror_interval_ms());
        }
        if (!root(config, context).equals(root())) {
            logger.info("sysfs: root " + root(config, context) + " applies at the next start; the mirror stays in " + root());
        }
    }

    private void schedule(long intervalMs) {
        assert Thread.holdsLock(this);
        every = Math.max(10, intervalMs);
        syncing = mirror.scheduleWithFixedDelay(this::refresh, every, every, TimeUnit.MILLISECONDS);
    }

    static Path root(Config config, BundleContext context) {
        if (!config.root().isBlank()) {
            return Path.of(config.root());
        }
        String fw = context.getProperty("peerdirect.sysfs.root");
        return fw != null && !fw.isBlank() ? Path.of(fw) : Path.of(System.getProperty("java.io.tmpdir"), "peerdirect-sys");
    }

    @Deactivate
    void deactivate() throws InterruptedException {
        mirror.shutdownNow();
        mirror.awaitTermination(5, TimeUnit.SECONDS);
        if (!mirrorFrozen()) {
            clearMirror();
        }
    }
}
