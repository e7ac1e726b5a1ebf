package org.peerdirect.mlx4;

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
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.PciIds;

/**
 * The mlx4 driver ({@code mlx4_core} + {@code mlx4_ib}): binds to every ConnectX-3 PCI function
 * ({@code 15b3:1003}), brings it up through the function's HCR, and registers {@code mlx4_<n>}
 * with the IB core by publishing its {@link IbDeviceOps}. A function's removal (hot-unplug) or
 * this bundle stopping is {@code mlx4_remove_one}: the device is unregistered from the core first
 * (which disassociates its users: EIO, MRs deregistered, QPs to error), then the hardware is
 * torn down (surprise removal) or reset for the next driver (unbind).
 */
@Component(service = Mlx4Driver.class, immediate = true)
public final class Mlx4Driver {
    /** ConnectX-3 ({@code mlx4_pci_table}'s {@code PCI_VDEVICE(MELLANOX, 0x1003)}), of {@link PciIds#PCI_VENDOR_ID_MELLANOX}. */
    static final int PCI_DEVICE_CONNECTX3 = 0x1003;


    private record Bound(Mlx4Device dev, ServiceRegistration<IbDeviceOps> reg, Runnable onRemoval) {
    }

    private final BundleContext ctx;
    private final UmemService umems;
    /** The kernel's page allocator: the driver's DMA pages (mailboxes, EQs, ICM) come from it. */
    private final Mm mm;
    private final Map<PciFunction, Bound> bound = new ConcurrentHashMap<>();
    /** Device indices in use: a new device takes the lowest free one, as the core's alloc_name does. */
    private final java.util.BitSet indices = new java.util.BitSet();

    @Activate
    public Mlx4Driver(BundleContext ctx, @Reference UmemService umems, @Reference Mm mm) {
        this.ctx = ctx;
        this.umems = umems;
        this.mm = mm;
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY, unbind = "unbindFunction",
            target = "(&(" + PciFunction.PCI_VENDOR + "=" + PciIds.PCI_VENDOR_ID_MELLANOX + ")("
                    + PciFunction.PCI_DEVICE + "=" + PCI_DEVICE_CONNECTX3 + "))")
    void bindFunction(PciFunction fn) {
        int index;
        synchronized (indices) {
            index = indices.nextClearBit(0);
            indices.set(index);
        }
        Mlx4Device dev;
        try {
            dev = new Mlx4Device("mlx4_" + index, fn, mm, umems); // mlx4_load_one through the HCR
        } catch (RuntimeException e) { // the bring-up failed, no DMA (a bus without IOMMU): not probed
            synchronized (indices) {
                indices.clear(index);
            }
            System.getLogger("org.peerdirect.mlx4").log(System.Logger.Level.WARNING, "mlx4: device not probed: " + e.getMessage());
            return;
        }
        Runnable onRemoval = () -> remove(fn, true);
        Dictionary<String, Object> props = new Hashtable<>();
        props.put("ib.device.name", dev.name());
        props.put("pci.bdf", fn.bdf());
        ServiceRegistration<IbDeviceOps> reg = ctx.registerService(IbDeviceOps.class, dev, props);
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
            b.reg().unregister(); // ib_unregister_device: the core disassociates on this thread
        } catch (IllegalStateException alreadyGone) {
            // unregistered with the stopping bundle
        }
        b.dev().removeHardware(surprise);
        synchronized (indices) {
            indices.clear(Integer.parseInt(b.dev().name().substring("mlx4_".length())));
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
