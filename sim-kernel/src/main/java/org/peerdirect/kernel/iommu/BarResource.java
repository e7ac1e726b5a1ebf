package org.peerdirect.kernel.iommu;

import java.lang.foreign.MemorySegment;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.pci.BarAperture;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * A BAR range of a PCI function mapped by {@code dma_map_resource}: its memory, or (aperture BAR)
 * the resolver of its pages; valid while the function is present. The page-table entries onto it
 * hold the page offset within the BAR ({@link IoPageTable#RESOURCE}).
 */
record BarResource(PciFunction fn, int bar, MemorySegment memory, BarAperture aperture) {

    /**
     * Hands [from, to) of this aperture BAR to its device as one flushing read; EIO naming the
     * domain and the run's IOVA {@code at} when the device reports the media did not take it.
     */
    void flush(String domain, long from, long to, long at) {
        if (!aperture.flush(from, to - from)) {
            throw new KernelException(Errno.EIO, String.format("%s: flush of BAR %d 0x%x+0x%x of %s completed with an error (the run at iova 0x%x)",
                    domain, bar, from, to - from, fn.bdf(), at));
        }
    }
}
