package org.peerdirect.hca.dpa;

import java.lang.foreign.MemorySegment;

/**
 * How windows reach host memory: through an mkey of the NIC, translated by the firmware's MPT to
 * IOVAs of the function's IOMMU domain and moved by its {@code DmaPort}, so the IOMMU audit sees
 * every window byte. Implemented by the ConnectX firmware when the lead wires the DPA in; a
 * revoked mkey (deregistered, invalidated) is absent from {@link #lookup} and makes
 * {@link #read}/{@link #write} throw, so a window never reaches freed memory.
 */
public interface WindowPort {

    /** What the DPA needs of an mkey: its PD, rights and range. */
    record Mkey(int pd, boolean read, boolean write, long start, long length) {
        public boolean covers(long va, long len) {
            return va >= start && va + len <= start + length;
        }
    }

    /** The mkey's PD, rights and range; null when it does not exist or was revoked. */
    Mkey lookup(int mkey);

    /** Reads host memory through {@code mkey}; throws (any runtime exception) on a fault. */
    void read(int mkey, long va, MemorySegment dst, long dstOffset, long len);

    /** Writes host memory through {@code mkey}; throws on a fault. */
    void write(int mkey, long va, MemorySegment src, long srcOffset, long len);
}
