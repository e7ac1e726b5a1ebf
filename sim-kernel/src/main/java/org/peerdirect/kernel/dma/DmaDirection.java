package org.peerdirect.kernel.dma;

/** {@code enum dma_data_direction}: which way the device may move data. */
public enum DmaDirection {
    /** the device writes and reads. */
    BIDIRECTIONAL(true, true),
    /** the device reads memory (a send buffer). */
    TO_DEVICE(true, false),
    /** the device writes memory (a receive buffer). */
    FROM_DEVICE(false, true);

    /** The device may read memory through the mapping. */
    public final boolean deviceReads;
    /** The device may write memory through the mapping. */
    public final boolean deviceWrites;

    DmaDirection(boolean r, boolean w) {
        this.deviceReads = r;
        this.deviceWrites = w;
    }
}
