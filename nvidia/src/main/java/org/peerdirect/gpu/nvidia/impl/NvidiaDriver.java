package org.peerdirect.gpu.nvidia.impl;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciDriverBindings;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * {@code nvidia.ko}: binds to the GPUs on the bus ({@code 10de:20f1}) and publishes one
 * {@link NvidiaRm} per GPU (service property {@code gpu.index}), in probe order as
 * {@code /dev/nvidia0}, {@code /dev/nvidia1}. A GPU that goes (unplug, bundle stop) frees what its
 * processes had, free callbacks first.
 */
@Component(immediate = true)
public final class NvidiaDriver {

    /** {@code PCI_VENDOR_ID_NVIDIA} of {@code include/linux/pci_ids.h}. */
    static final int PCI_VENDOR_ID_NVIDIA = 0x10de;
    /** GA100 [A100 PCIe 40GB], the one entry of this driver's {@code nv_pci_table}. */
    static final int PCI_DEVICE_ID_A100_PCIE_40GB = 0x20f1;

    private final PciDriverBindings<NvidiaRm> bindings;

    @Activate
    public NvidiaDriver(BundleContext ctx, @Reference Mm mm) {
        this.bindings = new PciDriverBindings<>(ctx, NvidiaRm.class, "gpu.index", (fn, index) -> new NvidiaRm(mm, fn, index), NvidiaRm::shutdown,
                System.getLogger("org.peerdirect.gpu"));
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unbindFunction", target = "(&(pci.vendor=" + PCI_VENDOR_ID_NVIDIA + ")(pci.device=" + PCI_DEVICE_ID_A100_PCIE_40GB + "))")
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
