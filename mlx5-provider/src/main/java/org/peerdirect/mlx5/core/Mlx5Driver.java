package org.peerdirect.mlx5.core;

import java.util.BitSet;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.PciIds;

/**
 * The {@code mlx5_core} PCI driver: binds to every ConnectX-4 ({@code 15b3:1013}), ConnectX-6 Dx
 * ({@code 15b3:101d}) and BlueField-3 integrated ConnectX-7 ({@code 15b3:a2dc}) function and brings it up ({@code probe_one} → {@link Mlx5CoreDev#load});
 * names them {@code mlx5_<n>} with the lowest free index. A function's removal or this bundle
 * stopping is {@code remove_one}: the device is torn down ({@link Mlx5CoreDev#unload}), through
 * commands while the function is there, locally when it is gone. Configuration Admin PID
 * {@code org.peerdirect.mlx5}: the command timeout, the health poll interval and the page-reclaim
 * timeout.
 */
@Component(service = Mlx5Driver.class, immediate = true, configurationPid = "org.peerdirect.mlx5")
@Designate(ocd = Mlx5Driver.Config.class)
public final class Mlx5Driver {
    /** {@code mlx5_core_pci_table}: the functions this driver binds (of {@link PciIds#PCI_VENDOR_ID_MELLANOX}). */
    static final int PCI_DEVICE_CONNECTX4 = 0x1013;
    /** ConnectX-6 Dx, {@code mlx5_core_pci_table}. */
    static final int PCI_DEVICE_CONNECTX6DX = 0x101d;
    /** "BlueField-3 integrated ConnectX-7 network controller", {@code mlx5_core_pci_table}. */
    static final int PCI_DEVICE_BLUEFIELD3 = 0xa2dc;


    @ObjectClassDefinition(name = "mlx5_core", description = "Timing of the mlx5 driver's command interface, health poll and teardown; "
            + "a change applies in place to every bound device.")
    @interface Config {
        @AttributeDefinition(min = "100", description = "command timeout in milliseconds (Linux: 60000 for most commands)")
        long cmd_timeout_ms() default 10_000;

        @AttributeDefinition(min = "10", description = "health poll interval in milliseconds (Linux: 2000)")
        long health_poll_ms() default 2_000;

        @AttributeDefinition(min = "100", description = "give up reclaiming firmware pages after this many milliseconds without progress")
        long reclaim_timeout_ms() default 5_000;
    }

    private record Bound(Mlx5CoreDev dev, Runnable onRemoval, org.osgi.framework.ServiceRegistration<Mlx5CoreDev> reg,
            org.osgi.framework.ServiceRegistration<org.peerdirect.mlx5.stats.Mlx5CoreStats> stats) {
    }

    private final org.osgi.framework.BundleContext ctx;

    private final Mm mm;
    /** The timing new devices get; changed in place by {@link #modified}. */
    private volatile Mlx5CoreDev.Settings settings;
    private final Map<PciFunction, Bound> bound = new ConcurrentHashMap<>();
    private final BitSet indices = new BitSet();
    private final System.Logger log = System.getLogger("org.peerdirect.mlx5");

    @Activate
    public Mlx5Driver(org.osgi.framework.BundleContext ctx, @Reference Mm mm, Config c) {
        this.ctx = ctx;
        this.mm = mm;
        this.settings = new Mlx5CoreDev.Settings(c.cmd_timeout_ms(), c.health_poll_ms(), c.reclaim_timeout_ms());
    }

    /**
     * New timing, applied in place to every bound device and to those bound later: nothing is
     * unbound (before, every delivery, even the guard putting back a rejected value, unbound and
     * re-probed every mlx5 device, ending its users' objects).
     */
    @Modified
    void modified(Config c) {
        settings = new Mlx5CoreDev.Settings(c.cmd_timeout_ms(), c.health_poll_ms(), c.reclaim_timeout_ms());
        for (Bound b : bound.values()) {
            b.dev().settings(settings);
        }
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unbindFunction", target = "(&(" + PciFunction.PCI_VENDOR + "=" + PciIds.PCI_VENDOR_ID_MELLANOX + ")(|("
                    + PciFunction.PCI_DEVICE + "=" + PCI_DEVICE_CONNECTX4 + ")(" + PciFunction.PCI_DEVICE + "=" + PCI_DEVICE_CONNECTX6DX + ")("
                    + PciFunction.PCI_DEVICE + "=" + PCI_DEVICE_BLUEFIELD3 + ")))")
    void bindFunction(PciFunction fn) {
        int index;
        synchronized (indices) {
            index = indices.nextClearBit(0);
            indices.set(index);
        }
        Mlx5CoreDev.Settings used = settings;
        Mlx5CoreDev dev = new Mlx5CoreDev("mlx5_" + index, fn, mm, used);
        try {
            dev.load();
        } catch (RuntimeException e) {
            synchronized (indices) {
                indices.clear(index);
            }
            log.log(System.Logger.Level.WARNING, "mlx5_core " + fn.bdf() + ": probe failed: " + e.getMessage());
            return;
        }
        Runnable onRemoval = () -> remove(fn);
        // the auxiliary device mlx5_ib binds to (mlx5_rescan_drivers)
        java.util.Dictionary<String, Object> props = new java.util.Hashtable<>();
        props.put("mlx5.name", dev.name());
        props.put("pci.bdf", fn.bdf());
        var reg = ctx.registerService(Mlx5CoreDev.class, dev, props);
        // read-only: the command log, pages and EQs for tools outside the driver (the web console)
        bound.put(fn, new Bound(dev, onRemoval, reg, ctx.registerService(org.peerdirect.mlx5.stats.Mlx5CoreStats.class, new Mlx5CoreStatsView(dev), props)));
        fn.addRemovalListener(onRemoval); // after recording: a function already gone runs it at once
        if (settings != used) {
            dev.settings(settings); // modified ran during the probe, before this device was in `bound`
        }
    }

    void unbindFunction(PciFunction fn) {
        Bound b = bound.get(fn);
        if (b != null) {
            fn.removeRemovalListener(b.onRemoval());
        }
        remove(fn);
    }

    private void remove(PciFunction fn) {
        Bound b = bound.remove(fn);
        if (b == null) {
            return;
        }
        try {
            b.stats().unregister();
        } catch (IllegalStateException alreadyGone) {
            // unregistered with the stopping bundle
        }
        try {
            b.reg().unregister(); // mlx5_ib goes first, its objects destroyed by commands while the core is up
        } catch (IllegalStateException alreadyGone) {
            // unregistered with the stopping bundle
        }
        b.dev().unload();
        synchronized (indices) {
            indices.clear(Integer.parseInt(b.dev().name().substring("mlx5_".length())));
        }
    }

    /** The devices bound now, by name. */
    public List<Mlx5CoreDev> devices() {
        return bound.values().stream().map(Bound::dev).sorted(Comparator.comparing(d -> Integer.parseInt(d.name().substring(5)))).toList();
    }

    /** The device with this name ({@code mlx5_0}), or null. */
    public Mlx5CoreDev device(String name) {
        for (Bound b : bound.values()) {
            if (b.dev().name().equals(name)) {
                return b.dev();
            }
        }
        return null;
    }

    @Deactivate
    void deactivate() {
        for (PciFunction fn : bound.keySet()) {
            unbindFunction(fn);
        }
    }
}
