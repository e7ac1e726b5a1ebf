package org.peerdirect.kernel.dma;

import java.lang.foreign.MemorySegment;

import org.osgi.annotation.versioning.ProviderType;

/**
 * The device side of an IOMMU domain: all a device model sees of memory. It issues reads, writes
 * and atomics at I/O virtual (bus) addresses, and the IOMMU checks every one against the domain's
 * mappings; it never sees frames, page tables or the mapping calls, which are the driver's side
 * ({@link DmaMapper}).
 *
 * <p>Every transfer is all or nothing: each page of the range is translated and checked (mapping,
 * direction, the frame not freed since it was mapped, the BAR's function still present) before the
 * first byte moves, and a refused one throws {@code IommuFault} (of the IOMMU package) having moved nothing. A transfer
 * that returned is complete; one that starts after the driver's {@code dma_unmap} returned faults.
 */
@ProviderType
public interface DmaPort {

    /** The domain's name: the device's bus address. */
    String name();

    /** A memory read request: {@code len} bytes at {@code iova} into {@code dst}. */
    void read(long iova, MemorySegment dst, long dstOffset, long len);

    /** A memory write request: {@code len} bytes from {@code src} to {@code iova}. */
    void write(long iova, MemorySegment src, long srcOffset, long len);

    /**
     * One transfer from this device's {@code srcIova} to {@code dst}'s {@code dstIova} (the
     * requester's read and the responder's write of an RDMA transfer, or a loopback copy when
     * {@code dst} is this port). Both ranges are checked before any byte moves.
     *
     * @throws IllegalArgumentException when {@code dst} belongs to another IOMMU
     */
    void copyTo(long srcIova, DmaPort dst, long dstIova, long len);

    /** 8-byte atomic fetch-and-add at an 8-byte aligned IOVA (PCIe FetchAdd AtomicOp). */
    long fetchAdd(long iova, long delta);

    /** 8-byte atomic compare-and-swap; returns the value found (PCIe CAS AtomicOp). */
    long compareAndSwap(long iova, long expect, long update);

    /**
     * An 8-byte single-copy atomic store at an 8-byte aligned IOVA, ordered after every earlier
     * write of this port (release): the responder's side of an IBA 1.5 ATOMIC WRITE (rxe's
     * {@code smp_store_release}). Needs the write right only.
     *
     * @since 1.3
     */
    void atomicWrite(long iova, long value);

    /**
     * A descriptor handed to the driver: {@code len} bytes from {@code src} to {@code iova}, the
     * last 8-byte word becoming visible after all the others (a release store), so a driver that
     * sees the ownership bit in that word (a CQE's {@code op_own}, an EQE's owner byte) and then
     * reads the rest sees the whole descriptor. One translation and one transfer: what the device
     * does in one TLP that the CPU observes in address order. {@code iova} 8-byte aligned,
     * {@code len} a multiple of 8 from 8 to the end of {@code iova}'s 4 KiB page.
     *
     * @since 1.6
     */
    void writeDescriptor(long iova, MemorySegment src, long srcOffset, int len);

    /**
     * A flushing read over [iova, iova+len) (PCIe's zero-length read, one per page): returns once
     * every earlier write of this port to that range is globally visible and, where the memory
     * behind a page is a persistent memory region that promises it on a read's completion (an
     * NVMe PMR with {@code PMRWBM} bit 0), persistent. The responder's side of an IBA 1.5 RDMA
     * FLUSH. Every page must be mapped with the read right, as for a read; {@code len} 0 flushes
     * nothing.
     *
     * @throws org.peerdirect.kernel.mm.KernelException EIO when a device behind the range
     *         completed the read with an error (its media did not take the data)
     * @since 1.4
     */
    void flush(long iova, long len);
}
