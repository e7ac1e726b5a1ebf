package org.peerdirect.hca.engine;

/**
 * Where a CQ in host memory gets its CQEs (the ConnectX-4+ personality): the CQ writer fills a
 * {@link Cqe} with the hardware fields and hands it here, under the CQ's producer lock, to be
 * written by DMA into the driver's ring in that personality's CQE layout. The consumer index the
 * overrun check needs is the driver's doorbell record, read from memory only when the ring looks
 * full.
 */
public interface CqeSink {

    /** Writes CQE number {@code index} (monotonic; the ring slot and owner bit follow from it). Called under the CQ lock. */
    void write(long index, Cqe cqe);

    /** The driver's consumer counter as its doorbell record shows it now (24 bits, as the hardware keeps it). */
    long consumerIndex();
}
