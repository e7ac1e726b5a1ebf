package org.peerdirect.kernel.iommu;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.internal.PhysicalMemory;

/** The IOMMU: one {@link IommuDomain} per device, and the audit over all of them. */
public class Iommu {

    private final PhysicalMemory phys;
    private final Map<String, IommuDomain> domains = new ConcurrentHashMap<>();
    private final AtomicLong faults = new AtomicLong();
    private final AtomicLong useAfterFreeOfDestroyed = new AtomicLong();
    private final AtomicLong barBytesOfDestroyed = new AtomicLong();
    private final AtomicLong leakedAtDestroy = new AtomicLong();

    public Iommu(Mm mm) {
        this.phys = PhysicalMemory.of(mm);
    }

    /** {@code iommu_domain_alloc} + attach: a device's own domain; the name must be unique. */
    public IommuDomain createDomain(String device) {
        IommuDomain d = new IommuDomain(this, device, phys);
        if (domains.putIfAbsent(device, d) != null) {
            throw new KernelException(Errno.EINVAL, "an IOMMU domain for device " + device + " exists already");
        }
        return d;
    }

    /**
     * Detaches and frees a domain. Mappings still present are removed and counted as leaked
     * (a driver that forgot to unmap); the count is returned.
     */
    public long destroyDomain(IommuDomain d) {
        if (!domains.remove(d.name(), d)) {
            throw new KernelException(Errno.EINVAL, "IOMMU domain " + d.name() + " is not attached (destroyed twice?)");
        }
        useAfterFreeOfDestroyed.addAndGet(d.useAfterFreeCount());
        barBytesOfDestroyed.addAndGet(d.barBytes());
        long leaked = d.destroy();
        leakedAtDestroy.addAndGet(leaked);
        return leaked;
    }

    public List<IommuDomain> domains() {
        return domains.values().stream().sorted((a, b) -> a.name().compareTo(b.name())).toList();
    }

    void faulted() {
        faults.incrementAndGet();
    }

    /**
     * Bytes devices moved to or from other functions' BARs (peer-to-peer DMA: an HCA writing a
     * GPU's BAR1) through the domains attached now and those destroyed before.
     */
    public long barBytes() {
        long b = barBytesOfDestroyed.get();
        for (IommuDomain d : domains.values()) {
            b += d.barBytes();
        }
        return b;
    }

    /** Mappings a destroyed domain still held (driver leaks), since start. */
    public long leakedAtDestroy() {
        return leakedAtDestroy.get();
    }

    public IommuAudit audit() {
        long uaf = useAfterFreeOfDestroyed.get();
        long live = 0;
        for (IommuDomain d : domains.values()) {
            uaf += d.useAfterFreeCount();
            live += d.mappedPages();
        }
        return new IommuAudit(faults.get(), uaf, phys.freedWhileDmaMapped(), live);
    }
}
