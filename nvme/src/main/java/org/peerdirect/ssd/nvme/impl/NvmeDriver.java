package org.peerdirect.ssd.nvme.impl;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciDriverBindings;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.PciIds;
import org.peerdirect.ssd.nvme.NvmePmr;

/**
 * {@code nvme.ko}'s PMR part: binds to the SSDs on the bus ({@code 144d:a824}) and publishes one
 * {@link NvmePmr} per controller (service property {@code ssd.index}), {@code nvme0},
 * {@code nvme1} in probe order. A controller that goes is shut down normally after its mappings
 * are unmapped (pins invalidated first).
 */
@Component(immediate = true)
public final class NvmeDriver {
    /**
     * The Samsung PM173X ({@code nvme_id_table}'s {@code PCI_DEVICE(0x144d, 0xa824)}), of
     * {@link PciIds#PCI_VENDOR_ID_SAMSUNG}: the one controller model with a PMR this driver binds.
     */
    static final int PCI_DEVICE_PM173X = 0xa824;

    private final PciDriverBindings<NvmePmr> bindings;

    @Activate
    public NvmeDriver(BundleContext ctx, @Reference Mm mm) {
        this.bindings = new PciDriverBindings<>(ctx, NvmePmr.class, "ssd.index", (fn, index) -> new NvmePmr(mm, fn, index), NvmePmr::shutdown,
                System.getLogger("org.peerdirect.ssd"));
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unbindFunction", target = "(&(" + PciFunction.PCI_VENDOR + "=" + PciIds.PCI_VENDOR_ID_SAMSUNG + ")("
                    + PciFunction.PCI_DEVICE + "=" + PCI_DEVICE_PM173X + "))")
    void bindFunction(PciFunction fn) {
        bindings.bind(fn);
    }

    void unbindFunction(PciFunction fn) {
        bindings.unbind(fn);
    }

    @Deactivate
    void deactivate() {
        bindings.unbindAll();
    }
}
