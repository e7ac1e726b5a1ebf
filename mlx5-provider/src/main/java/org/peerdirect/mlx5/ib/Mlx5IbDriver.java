package org.peerdirect.mlx5.ib;

import java.util.Collection;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.mlx5.core.Mlx5CoreDev;

/**
 * {@code mlx5_ib}: the auxiliary driver on top of {@code mlx5_core}. For every core device it
 * registers an IB device of the same name with the IB core by publishing its {@link IbDeviceOps};
 * the core device going (removal, provider stop) or being found dead by the health poll
 * unregisters it first, which disassociates its users (EIO, MRs deregistered, QPs to error)
 * while the core can still take the destroy commands.
 */
@Component(immediate = true, service = Mlx5IbDriver.class)
public final class Mlx5IbDriver {

    private record Bound(Mlx5IbDev dev, ServiceRegistration<IbDeviceOps> reg, Runnable onDead, Mlx5OdpExport odp) {
    }

    /** The sysfs tree, when there is one; the ODP counters of every bound device are put in it. Guarded by this for the export. */
    private volatile org.peerdirect.kernel.sysfs.Sysfs sysfs;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unbindSysfs")
    synchronized void bindSysfs(org.peerdirect.kernel.sysfs.Sysfs s) {
        sysfs = s;
        for (Bound b : bound.values()) {
            b.odp().addTo(s);
        }
    }

    synchronized void unbindSysfs(org.peerdirect.kernel.sysfs.Sysfs s) {
        if (sysfs == s) {
            sysfs = null; // the tree goes with its service
        }
    }

    private final BundleContext ctx;
    private final UmemService umems;
    private final Map<Mlx5CoreDev, Bound> bound = new ConcurrentHashMap<>();

    @Activate
    public Mlx5IbDriver(BundleContext ctx, @Reference UmemService umems) {
        this.ctx = ctx;
        this.umems = umems;
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unbindCore")
    void bindCore(Mlx5CoreDev core) {
        Mlx5IbDev dev;
        try {
            dev = new Mlx5IbDev(core, umems);
        } catch (RuntimeException e) {
            System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING, "mlx5_ib " + core.name() + ": not added: " + e.getMessage());
            return;
        }
        Dictionary<String, Object> props = new Hashtable<>();
        props.put("ib.device.name", dev.name());
        props.put("pci.bdf", core.function().bdf());
        ServiceRegistration<IbDeviceOps> reg = ctx.registerService(IbDeviceOps.class, dev, props);
        Runnable onDead = () -> unregister(core);
        Mlx5OdpExport odp = new Mlx5OdpExport(dev);
        bound.put(core, new Bound(dev, reg, onDead, odp));
        odp.register();
        synchronized (this) {
            if (sysfs != null) {
                odp.addTo(sysfs);
            }
        }
        core.addDeadListener(onDead);
    }

    void unbindCore(Mlx5CoreDev core) {
        Bound b = bound.get(core);
        if (b != null) {
            core.removeDeadListener(b.onDead());
        }
        unregister(core);
    }

    private void unregister(Mlx5CoreDev core) {
        Bound b = bound.remove(core);
        if (b == null) {
            return;
        }
        b.odp().unregister();
        synchronized (this) {
            if (sysfs != null) {
                b.odp().removeFrom(sysfs);
            }
        }
        try {
            b.reg().unregister(); // ib_unregister_device: the IB core disassociates on this thread
        } catch (IllegalStateException alreadyGone) {
            // unregistered with the stopping bundle
        }
        if (!core.isUp()) {
            // dead or removed: the QPs' move to ERR by command could not run, and the device writes
            // no flush CQEs; the reset flow completes the outstanding work in software
            b.dev().internalError();
        }
        b.dev().close(); // the mkey cache and the UMR QP, after the users' MRs went back to it
    }

    /** The IB devices registered now. */
    public Collection<Mlx5IbDev> devices() {
        return bound.values().stream().map(Bound::dev).toList();
    }

    @Deactivate
    void deactivate() {
        for (Mlx5CoreDev c : bound.keySet()) {
            unbindCore(c);
        }
    }
}
