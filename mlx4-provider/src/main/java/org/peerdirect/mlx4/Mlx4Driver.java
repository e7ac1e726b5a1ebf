package org.peerdirect.mlx4;

import java.util.Collection;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.osgi.framework.BundleContext;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.hca.cx3.ConnectX3;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The mlx4 driver ({@code mlx4_core} + {@code mlx4_ib}): binds to every ConnectX-3 PCI function
 * ({@code 15b3:1003}), brings the device up through its firmware interface and registers
 * {@code mlx4_<n>}. A function's removal (hot-unplug) or this bundle stopping is
 * {@code mlx4_remove_one}: the IB device is unregistered, its QPs move to error with their work
 * flushed, its MRs are revoked and their memory released; users then get EIO, never a hang.
 */
@Component(immediate = true)
public final class Mlx4Driver {

    private record Bound(Mlx4Device dev, ServiceRegistration<IbvDevice> reg, Runnable onRemoval) {
    }

    private final BundleContext ctx;
    private final UmemService umems;
    private final Map<PciFunction, Bound> bound = new ConcurrentHashMap<>();
    private final AtomicInteger nextIndex = new AtomicInteger();

    @Activate
    public Mlx4Driver(BundleContext ctx, @Reference UmemService umems) {
        this.ctx = ctx;
        this.umems = umems;
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY, unbind = "unbindFunction",
            target = "(&(pci.vendor=5555)(pci.device=4099))")
    void bindFunction(PciFunction fn) {
        ConnectX3 hw = firmware(fn.bdf());
        if (hw == null) {
            System.getLogger("org.peerdirect.mlx4").log(System.Logger.Level.WARNING,
                    "mlx4: no firmware interface for " + fn.bdf() + "; device not probed");
            return;
        }
        Mlx4Device dev = new Mlx4Device("mlx4_" + nextIndex.getAndIncrement(), hw, umems);
        Runnable onRemoval = () -> remove(fn, true);
        Dictionary<String, Object> props = new Hashtable<>();
        props.put(IbvDevice.NAME_PROPERTY, dev.name());
        props.put("pci.bdf", fn.bdf());
        ServiceRegistration<IbvDevice> reg = ctx.registerService(IbvDevice.class, dev, props);
        bound.put(fn, new Bound(dev, reg, onRemoval));
        // after recording the device: a function already gone runs the listener at once
        fn.addRemovalListener(onRemoval);
    }

    void unbindFunction(PciFunction fn) {
        Bound b = bound.get(fn);
        if (b != null) {
            fn.removeRemovalListener(b.onRemoval());
        }
        remove(fn, !fn.present());
    }

    private void remove(PciFunction fn, boolean surprise) {
        Bound b = bound.remove(fn);
        if (b == null) {
            return;
        }
        try {
            b.reg().unregister();
        } catch (IllegalStateException alreadyGone) {
            // unregistered with the stopping bundle
        }
        b.dev().remove(surprise);
    }

    private ConnectX3 firmware(String bdf) {
        try {
            Collection<ServiceReference<ConnectX3>> refs = ctx.getServiceReferences(ConnectX3.class, "(pci.bdf=" + bdf + ")");
            for (ServiceReference<ConnectX3> r : refs) {
                ConnectX3 hw = ctx.getService(r);
                if (hw != null) {
                    return hw;
                }
            }
            return null;
        } catch (InvalidSyntaxException e) {
            throw new IllegalArgumentException(e);
        }
    }

    /** The devices this driver registered (for tests and tools). */
    public Collection<Mlx4Device> devices() {
        return bound.values().stream().map(Bound::dev).toList();
    }

    @Deactivate
    void deactivate() {
        for (PciFunction fn : bound.keySet()) {
            unbindFunction(fn);
        }
    }
}
