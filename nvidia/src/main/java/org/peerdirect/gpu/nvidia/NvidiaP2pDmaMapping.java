package org.peerdirect.gpu.nvidia;

import java.util.List;

import org.peerdirect.kernel.dma.DmaMapper;

/** {@code struct nvidia_p2p_dma_mapping} ({@code nv-p2p.h}): one page table mapped for one peer device by {@link NvidiaRm#dmaMapPages}. */
public final class NvidiaP2pDmaMapping {
    final NvidiaP2pPageTable table;
    final DmaMapper peer;
    /** The bus address of each 64 KiB page as the peer sees it. */
    private final long[] dmaAddresses;
    /** {iova, 4 KiB pages} per IOMMU mapping made. */
    final List<long[]> runs;
    boolean unmapped;

    NvidiaP2pDmaMapping(NvidiaP2pPageTable table, DmaMapper peer, long[] dmaAddresses, List<long[]> runs) {
        this.table = table;
        this.peer = peer;
        this.dmaAddresses = dmaAddresses;
        this.runs = runs;
    }

    public int entries() {
        return dmaAddresses.length;
    }

    public long dmaAddress(int i) {
        return dmaAddresses[i];
    }
}
