package org.peerdirect.kernel.pci;

import java.lang.foreign.MemorySegment;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * A BAR that is a window onto the device's own memory rather than memory of its own: a GPU's
 * BAR1, whose pages the GPU maps onto pages of its video memory when they are pinned for peer
 * access ({@code nvidia_p2p_get_pages}) and unmaps when they are put back. The bus allocates no
 * memory for such a BAR; every access to one of its pages, MMIO by a driver or peer-to-peer DMA
 * through another device's IOMMU mapping, asks the model which memory is behind the page now.
 *
 * <p>A page the device has not mapped reads all ones and drops writes for MMIO (as an unclaimed
 * PCIe request), and is a use-after-free for DMA: a peer that reaches a BAR page its owner took
 * back (a GPU page freed under a registration) is exactly the stray access the audit exists to
 * catch.
 */
@ConsumerType
@FunctionalInterface
public interface BarAperture {

    /**
     * The memory now behind the 4 KiB page at {@code offset} of the BAR, starting at that page's
     * first byte, or {@code null} when the device has nothing mapped there. At least 4096 bytes;
     * longer only where the device's memory is contiguous behind the following BAR pages too and
     * those pages are mapped and unmapped together with this one (the rest of a GPU's 64 KiB page),
     * which lets a transfer resolve and copy them at once. Called on every access: it must be
     * quick and must not block. The segment may be closed later (the device freed its memory);
     * an access then fails as a use-after-free, it never reaches freed memory.
     *
     * @param offset page-aligned, inside the BAR
     */
    MemorySegment page(long offset);

    /**
     * True when the memory behind this BAR is a persistent memory region (an NVMe PMR): the
     * kernel's {@code IORES_DESC_PERSISTENT_MEMORY}. A GPU's BAR1 is not.
     *
     * @since 0.7
     */
    default boolean persistent() {
        return false;
    }

    /**
     * A flushing read (PCIe zero-length read) reached BAR [offset, offset+length): returns once
     * every earlier write to that range is where a read's completion promises it (for a persistent
     * region whose write-barrier mechanism is "the completion of a memory read", persistent);
     * false when the device completed the read with an error (the media did not take the data).
     * Page-aligned, inside the BAR; may block for the device's media.
     *
     * @since 0.7
     */
    default boolean flush(long offset, long length) {
        return true;
    }
}
