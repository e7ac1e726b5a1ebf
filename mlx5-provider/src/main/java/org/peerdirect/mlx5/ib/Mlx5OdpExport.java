package org.peerdirect.mlx5.ib;

import java.lang.management.ManagementFactory;
import java.util.function.ToLongFunction;

import javax.management.JMException;
import javax.management.ObjectName;

import org.peerdirect.kernel.sysfs.Sysfs;

/**
 * Puts one device's ODP counters where the users read them: the sysfs tree
 * ({@code class/infiniband/<dev>/odp/}: {@code page_faults}, {@code fault_errors},
 * {@code resume_failures}, {@code invalidations}, {@code prefetched_pages},
 * {@code prefetch_errors}, and {@code mrs} with a line per MR as {@code rdma res show mr} prints
 * the restrack counters) and JMX ({@link Mlx5OdpStatsMXBean}). Every value is read when asked:
 * nothing is copied on the data path.
 *
 * <p>Lock rule: the sysfs suppliers read atomic counters and the device's ODP state under its
 * own monitor ({@code odpIfStarted}); they take no lock that a caller into sysfs holds.
 */
final class Mlx5OdpExport implements Mlx5OdpStatsMXBean {

    private final Mlx5IbDev dev;

    Mlx5OdpExport(Mlx5IbDev dev) {
        this.dev = dev;
    }

    /** The sysfs directory of the device's ODP counters. */
    String sysfsDir() {
        return "class/infiniband/" + dev.name() + "/odp";
    }

    ObjectName objectName() throws JMException {
        return new ObjectName("org.peerdirect.mlx5:type=OdpStats,device=" + ObjectName.quote(dev.name()));
    }

    /** Creates the attributes (replacing what a former device of this name left). */
    void addTo(Sysfs sysfs) {
        String d = sysfsDir();
        sysfs.mkdir(d);
        attribute(sysfs, d + "/page_faults", o -> o.faults.get());
        attribute(sysfs, d + "/fault_errors", o -> o.faultErrors.get());
        attribute(sysfs, d + "/resume_failures", o -> o.resumeFailures.get());
        attribute(sysfs, d + "/invalidations", o -> o.invalidations.get());
        attribute(sysfs, d + "/prefetched_pages", o -> o.prefetchedPages.get());
        attribute(sysfs, d + "/prefetch_errors", o -> o.prefetchErrors.get());
        sysfs.attribute(d + "/mrs", () -> String.join("\n", getMrs()));
    }

    private void attribute(Sysfs sysfs, String path, ToLongFunction<Mlx5Odp> counter) {
        sysfs.attribute(path, () -> Long.toString(value(counter)));
    }

    private long value(ToLongFunction<Mlx5Odp> counter) {
        Mlx5Odp o = dev.odpIfStarted();
        return o == null ? 0 : counter.applyAsLong(o);
    }

    void removeFrom(Sysfs sysfs) {
        if (sysfs.exists(sysfsDir())) {
            sysfs.remove(sysfsDir());
        }
    }

    /** Registers the MXBean (logged, not thrown, when the name is taken or JMX refuses it: the device works without it). */
    void register() {
        try {
            ManagementFactory.getPlatformMBeanServer().registerMBean(this, objectName());
        } catch (JMException e) {
            System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING, dev.name() + ": ODP counters not in JMX: " + e.getMessage());
        }
    }

    void unregister() {
        try {
            if (ManagementFactory.getPlatformMBeanServer().isRegistered(objectName())) {
                ManagementFactory.getPlatformMBeanServer().unregisterMBean(objectName());
            }
        } catch (JMException e) {
            // already gone
        }
    }

    @Override
    public long getPageFaults() {
        return value(o -> o.faults.get());
    }

    @Override
    public long getFaultErrors() {
        return value(o -> o.faultErrors.get());
    }

    @Override
    public long getResumeFailures() {
        return value(o -> o.resumeFailures.get());
    }

    @Override
    public long getInvalidations() {
        return value(o -> o.invalidations.get());
    }

    @Override
    public long getPrefetchedPages() {
        return value(o -> o.prefetchedPages.get());
    }

    @Override
    public long getPrefetchErrors() {
        return value(o -> o.prefetchErrors.get());
    }

    @Override
    public String[] getMrs() {
        Mlx5Odp o = dev.odpIfStarted();
        if (o == null) {
            return new String[0];
        }
        java.util.List<String> out = new java.util.ArrayList<>();
        o.odpMkeys().forEach(m -> out.add(m.toString()));
        return out.toArray(String[]::new);
    }
}
