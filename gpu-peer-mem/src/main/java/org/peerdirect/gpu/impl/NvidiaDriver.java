package org.peerdirect.gpu.impl;

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
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * {@code nvidia.ko}: binds to the GPUs on the bus ({@code 10de:20f1}) and publishes one
 * {@link NvidiaRm} per GPU (service property {@code gpu.index}), in probe order as
 * {@code /dev/nvidia0}, {@code /dev/nvidia1}. A GPU that goes (unplug, bundle stop) frees what its
 * processes had, free callbacks first.
 */
@Component(immediate = true)
public final class NvidiaDriver {

    private record Bound(NvidiaRm rm, ServiceRegistration<NvidiaRm> reg) {
    }

    private final BundleContext ctx;
    private final Mm mm;
    private final Map<PciFunction, Bound> bound = new ConcurrentHashMap<>();
    private final java.util.BitSet indices = new java.util.BitSet();

    @Activate
    public NvidiaDriver(BundleContext ctx, @Reference Mm mm) {
        this.ctx = ctx;
        this.mm = mm;
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unbindFunction", target = "(&(pci.vendor=4318)(pci.device=8433))")
    void bindFunction(PciFunction fn) {
        int index;
        synchronized (indices) {
            index = indices.nextClearBit(0);
            indices.set(index);
        }
        NvidiaRm rm = new NvidiaRm(mm, fn, index);
        Dictionary<String, Object> props = new Hashtable<>();
        props.put("gpu.index", index);
        props.put("pci.bdf", fn.bdf());
        bound.put(fn, new Bound(rm, ctx.registerService(NvidiaRm.class, rm, props)));
    }

    void unbindFunction(PciFunction fn) {
        Bound b = bound.remove(fn);
        if (b == null) {
            return;
        }
        try {
            b.reg.unregister();
        } catch (IllegalStateException alreadyGone) {
            // unregistered with the stopping bundle
        }
        for (String leak : b.rm.shutdown()) {
            System.getLogger("org.peerdirect.gpu").log(System.Logger.Level.WARNING, leak);
        }
        synchronized (indices) {
            indices.clear(b.rm.index());
        }
    }

    @Deactivate
    void deactivate() {
        for (PciFunction fn : bound.keySet()) {
            unbindFunction(fn);
        }
    }
}
