package org.peerdirect.rdma.tools;

/**
 * The BAR1 aperture of the GPU a range belongs to, as {@code nvidia-smi -q -d MEMORY} reports it
 * ("BAR1 Memory Usage"): what {@code rdma:doctor} needs to say whether a peer registration
 * ({@code nvidia_p2p_get_pages}) or a dma-buf mapping of GPU memory would find BAR1 space. Its
 * one implementation is {@link NvidiaBar1}; the tools work without it (no GPU driver loaded).
 */
public interface GpuBar1 {

    /**
     * The GPU of a range and its BAR1, in 64 KiB slots (one per GPU page mapped).
     *
     * @param neededSlots the slots a pin of the range takes (its 64 KiB pages, the range widened to them)
     * @param freeSlots the slots free now
     * @param totalSlots the aperture's size
     */
    record Bar1(String gpu, String bdf, long neededSlots, long freeSlots, long totalSlots) {

        /** Whether the range's pin fits in what is free now. */
        boolean fits() {
            return neededSlots <= freeSlots;
        }
    }

    /** The GPU memory [addr, addr+length) of process {@code pid} lies in, with its BAR1 now; null when the range is no GPU's. */
    Bar1 bar1(int pid, long addr, long length);
}
