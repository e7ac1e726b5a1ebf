package org.peerdirect.kernel.iommu.impl;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;

/** The IOMMU service over the memory manager's physical memory. */
@Component(immediate = true, // holds state: a delayed component would be disposed when unused
        service = Iommu.class)
public final class IommuService extends Iommu {

    @Activate
    public IommuService(@Reference Mm mm) {
        super(mm);
    }

    @Deactivate
    void deactivate() {
        for (var d : domains()) {
            destroyDomain(d);
        }
    }
}
