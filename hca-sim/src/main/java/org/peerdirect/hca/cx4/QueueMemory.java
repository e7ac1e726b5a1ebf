package org.peerdirect.hca.cx4;

import org.peerdirect.kernel.dma.DmaPort;

/**
 * Where a queue's ring or doorbell record lives, as the device reaches it: a {@code pas} list of
 * 4 KiB pages the driver gave in the command ({@link #pas}), a record at an address
 * ({@link #at}), or a range of a DevX umem ({@link Umems.Umem#region}). Each kind names the port
 * its bytes are reached through, so a kind in another memory space (the DPA's on-card memory,
 * not behind the host IOMMU) is one more implementation.
 *
 * <p>Immutable but for {@link #release}, which the firmware thread calls once, when the queue
 * goes.
 */
interface QueueMemory {

    /** The port the bytes are read and written through. */
    DmaPort port();

    /**
     * A device-local memory space the bytes are in (the DPA's on-card memory of a DUMEM), which
     * an mkey over them must address instead of the function's IOMMU domain; null for host memory.
     */
    default DmaPort space() {
        return null;
    }

    /** The device address of byte {@code offset}; the bytes are contiguous to the end of its 4 KiB page. */
    long address(long offset);

    /** The bytes the queue may use. */
    long bytes();

    /** The queue is gone: a umem range lets its umem go. */
    default void release() {
    }

    /** A ring in the pages of a {@code pas} list. */
    static QueueMemory pas(DmaPort port, long[] pas) {
        return new QueueMemory() {
            @Override
            public DmaPort port() {
                return port;
            }

            @Override
            public long address(long offset) {
                return pas[(int) (offset >>> 12)] + (offset & 0xfff);
            }

            @Override
            public long bytes() {
                return 4096L * pas.length;
            }
        };
    }

    /** A doorbell record of {@code bytes} at device address {@code address}. */
    static QueueMemory at(DmaPort port, long address, long bytes) {
        return new QueueMemory() {
            @Override
            public DmaPort port() {
                return port;
            }

            @Override
            public long address(long offset) {
                return address + offset;
            }

            @Override
            public long bytes() {
                return bytes;
            }
        };
    }
}
