package org.peerdirect.ssd.impl;

import java.util.BitSet;
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
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.ssd.nvme.NvmePmr;

/**
 * {@code nvme.ko}'s PMR part: binds to the SSDs on the bus ({@code 144d:a824}) and publishes one
 * {@link NvmePmr} per controller (service property {@code ssd.index}), {@code nvme0},
 * {@code nvme1} in probe order. A controller that goes is shut down normally after its mappings
 * are unmapped (pins invalidated first).
 */
@Component(immediate = true)
public final class NvmeDriver {

    private record Bound(NvmePmr pmr, ServiceRegistration<NvmePmr> reg) {
    }

    private static final System.Logger LOG = System.getLogger("org.peerdirect.ssd");

    private final BundleContext ctx;
    private final Mm mm;
    private final Map<PciFunction, Bound> bound = new ConcurrentHashMap<>();
    private final BitSet indices = new BitSet();

    @Activate
    public NvmeDriver(BundleContext ctx, @Reference Mm mm) {
        this.ctx = ctx;
        this.mm = mm;
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unbindFunction", target = "(&(pci.vendor=5197)(pci.device=43044))")
    void bindFunction(PciFunction fn) {
        int index;
        synchronized (indices) {
            index = indices.nextClearBit(0);
            indices.set(index);
        }
        NvmePmr pmr;
        try {
            pmr = new NvmePmr(mm, fn, index);
        } catch (RuntimeException e) {
            synchronized (indices) {
                indices.clear(index);
            }
            LOG.log(System.Logger.Level.ERROR, "nvme " + fn.bdf() + ": probe failed: " + e.getMessage());
            return;
        }
        Dictionary<String, Object> props = new Hashtable<>();
        props.put("ssd.index", index);
        props.put("pci.bdf", fn.bdf());
        bound.put(fn, new Bound(pmr, ctx.registerService(NvmePmr.class, pmr, props)));
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
        for (String leak : b.pmr.shutdown()) {
            LOG.log(System.Logger.Level.WARNING, leak);
        }
        synchronized (indices) {
            indices.clear(b.pmr.index());
        }
    }

    @Deactivate
    void deactivate() {
        for (PciFunction fn : bound.keySet()) {
            unbindFunction(fn);
        }
    }
}
