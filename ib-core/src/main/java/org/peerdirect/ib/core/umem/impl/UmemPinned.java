package org.peerdirect.ib.core.umem.impl;

import java.util.concurrent.atomic.AtomicBoolean;

import org.peerdirect.ib.core.umem.UmemInvalidateFunction;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.PinnedPages;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.peermem.PeerMemoryRegistry;
import org.peerdirect.kernel.dma.SgTable;

/** A umem over pinned host pages, DMA-mapped as one contiguous IOVA range. */
final class UmemPinned extends Umem {

    private final PinnedPages pages;
    private final long iova;
    private final AtomicBoolean released = new AtomicBoolean();

    /** Pins and maps; on failure nothing stays pinned or mapped. */
    UmemPinned(AddressSpace mm, DmaDevice device, long address, long length, boolean writable) {
        super(mm, device, address, length, writable);
        this.pages = mm.pinUserPages(address, length, writable);
        try {
            this.iova = device.dma().dmaMapSg(pages.pfns(), DmaDirection.BIDIRECTIONAL);
        } catch (RuntimeException e) {
            pages.unpin(false);
            throw e;
        }
        setBlocks(SgTable.of(new long[] {iova}, new long[] {npages * SgTable.PAGE_SIZE}));
    }

    @Override
    public boolean isPeer() {
        return false;
    }

    @Override
    public String peerClientName() {
        return null;
    }

    @Override
    public long ticket() {
        return PeerMemoryRegistry.NO_INVALIDATION_ID;
    }

    @Override
    public void activateInvalidationNotifier(UmemInvalidateFunction func) {
        // pinned memory is never invalidated
    }

    @Override
    public void stopInvalidationNotifier() {
    }

    @Override
    public boolean invalidated() {
        return false;
    }

    @Override
    public void release() {
        if (!released.compareAndSet(false, true)) {
            throw new IllegalStateException("umem " + describe() + " released twice");
        }
        try {
            device.dma().dmaUnmap(iova, Math.toIntExact(npages));
        } finally {
            pages.unpin(writable); // the pins and the memlock charge go back even if the unmap failed
        }
    }

    @Override
    public String toString() {
        return "pinned umem " + describe();
    }
}
