package org.peerdirect.kernel.pci.impl;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.annotation.bundle.Capability;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.FrameworkUtil;
import org.osgi.framework.ServiceFactory;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.pci.PciBus;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The PCI bus component. It owns one {@link PciBusCore} and registers two kinds of services itself:
 * <ul>
 * <li>{@link PciBus} as an {@link ServiceFactory}: the framework asks it for one
 * {@link BundlePciBus} per using bundle and hands it back ({@code ungetService}) when that bundle
 * releases the service — at the latest when the bundle stops — and the view then removes the
 * functions that bundle registered: stopping a device model's bundle hot-unplugs its devices.</li>
 * <li>every registered function as a {@link PciFunction} service with the properties
 * {@value PciFunction#PCI_VENDOR}, {@value PciFunction#PCI_DEVICE}, {@value PciFunction#PCI_BDF}
 * and {@value PciFunction#PCI_CLASS}, unregistered when the function is removed.</li>
 * </ul>
 * Why a ServiceFactory registered by hand rather than a DS {@code scope = BUNDLE} component: a
 * bundle-scoped DS component gets one instance per bundle, so the shared bus would need a second,
 * singleton component and an internal service to reach it. A ServiceFactory is the framework's own
 * per-bundle hook, so one component holds all state and has one lifecycle.
 *
 * <p>Deactivation (idempotent) unregisters the bus service, which releases every bundle's view, then
 * shuts the core down, removing whatever is left; no IRQ thread outlives it. The two services are
 * declared as {@code osgi.service} capabilities by hand, since DS does not know about them.
 */
@Capability(namespace = "osgi.service", attribute = "objectClass:List<String>=\"org.peerdirect.kernel.pci.PciBus\"", uses = PciBus.class)
@Capability(namespace = "osgi.service", attribute = "objectClass:List<String>=\"org.peerdirect.kernel.pci.PciFunction\"", uses = PciFunction.class)
@Component(service = {}, immediate = true)
public final class PciBusService {

    private final Logger logger;
    private final BundleContext context;
    private final PciBusCore core;
    /** The published function services; an entry exists from registration until removal. */
    private final Map<PciFunction, ServiceRegistration<PciFunction>> published = new ConcurrentHashMap<>();
    private final ServiceRegistration<PciBus> busRegistration;

    @Activate
    public PciBusService(BundleContext context, @Reference(service = LoggerFactory.class) Logger logger, @Reference Iommu iommu) {
        this.context = context;
        this.logger = logger;
        this.core = new PciBusCore(new Publisher(), logger::warn, iommu);
        this.busRegistration = context.registerService(PciBus.class, new PerBundle(), null);
    }

    /** Hands each using bundle its own view; the view's release removes that bundle's functions. */
    private final class PerBundle implements ServiceFactory<PciBus> {
        @Override
        public PciBus getService(Bundle bundle, ServiceRegistration<PciBus> registration) {
            return new BundlePciBus(core, bundle.getSymbolicName() + " [" + bundle.getBundleId() + "]");
        }

        @Override
        public void ungetService(Bundle bundle, ServiceRegistration<PciBus> registration, PciBus service) {
            ((BundlePciBus) service).release();
        }
    }

    private final class Publisher implements PciBusCore.Listener {
        @Override
        public void added(PciFunction f) {
            // what the kernel prints when it finds a device
            logger.info("pci {}: [{}:{}] class 0x{} {}", f.bdf(), hex4(f.vendorId()), hex4(f.deviceId()),
                    String.format("%06x", f.classCode()), f.name());
            ServiceRegistration<PciFunction> reg;
            try {
                reg = context.registerService(PciFunction.class, f, FrameworkUtil.asDictionary(Map.of(
                        PciFunction.PCI_VENDOR, f.vendorId(),
                        PciFunction.PCI_DEVICE, f.deviceId(),
                        PciFunction.PCI_BDF, f.bdf(),
                        PciFunction.PCI_CLASS, f.classCode())));
            } catch (IllegalStateException e) {
                logger.warn("pci {}: cannot publish, the bus is going away: {}", f.bdf(), e.getMessage());
                return;
            }
            published.put(f, reg);
            // removed while we registered: removed() may have found nothing to unregister yet
            if (!f.present()) {
                unpublish(f);
            }
        }

        @Override
        public void removed(PciFunction f) {
            logger.info("pci {}: removed", f.bdf());
            unpublish(f);
        }
    }

    private static String hex4(int id) {
        return String.format("%04x", id);
    }

    private void unpublish(PciFunction f) {
        ServiceRegistration<PciFunction> reg = published.remove(f);
        if (reg != null) {
            try {
                reg.unregister();
            } catch (IllegalStateException e) {
                // already unregistered: the framework cleans up a stopping bundle's services itself
            }
        }
    }

    @Deactivate
    void deactivate() {
        try {
            busRegistration.unregister(); // ungetService for every using bundle: their functions go
        } catch (IllegalStateException e) {
            // already unregistered
        }
        core.close();
        published.keySet().forEach(this::unpublish);
    }
}
