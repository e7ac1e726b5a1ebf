package org.peerdirect.kernel.dma;

import java.util.Arrays;

/**
 * A DMA-mapped scatter list ({@code struct sg_table} after {@code dma_map_sg}): entries of
 * (DMA address, length) in order, covering a registration's pages. Immutable.
 *
 * <p>A client builds it in {@link PeerMemoryClient#dmaMap}; the IB core checks that every entry
 * starts and ends on a {@link #PAGE_SIZE} boundary (the contract of {@code dma_map}) and keeps
 * the table it was given: {@code dmaUnmap} and {@code putPages} receive this very object, never
 * a trimmed copy (the kernel restores its trimmed first and last entries before unmapping).
 */
public final class SgTable {

    /** The CPU and IOMMU page size, 4 KiB. */
    public static final long PAGE_SIZE = 4096;

    /** The table with no entries: what {@code putPages} receives when {@code dmaMap} failed. */
    public static final SgTable EMPTY = new SgTable(new long[0], new long[0]);

    private final long[] dmaAddress;
    private final long[] length;
    private final long totalLength;

    private SgTable(long[] dmaAddress, long[] length) {
        this.dmaAddress = dmaAddress;
        this.length = length;
        long t = 0;
        for (long l : length) {
            t = Math.addExact(t, l);
        }
        this.totalLength = t;
    }

    /** A table of the given entries; arrays are copied. */
    public static SgTable of(long[] dmaAddress, long[] length) {
        if (dmaAddress.length != length.length) {
            throw new IllegalArgumentException("sg_table: " + dmaAddress.length + " addresses but " + length.length + " lengths");
        }
        for (int i = 0; i < length.length; i++) {
            if (length[i] <= 0) {
                throw new IllegalArgumentException("sg_table: entry " + i + " has length " + length[i]);
            }
        }
        return new SgTable(dmaAddress.clone(), length.clone());
    }

    /** {@code nents} / {@code nmap}: the number of DMA-mapped entries. */
    public int nents() {
        return length.length;
    }

    public long dmaAddress(int i) {
        return dmaAddress[i];
    }

    public long length(int i) {
        return length[i];
    }

    /** Sum of the entries' lengths. */
    public long totalLength() {
        return totalLength;
    }

    /** Index of the first entry that is not {@link #PAGE_SIZE} aligned at start or end, or -1. */
    public int firstMisaligned() {
        for (int i = 0; i < length.length; i++) {
            if ((dmaAddress[i] & (PAGE_SIZE - 1)) != 0 || (length[i] & (PAGE_SIZE - 1)) != 0) {
                return i;
            }
        }
        return -1;
    }

    /**
     * A copy whose first entry starts {@code trimFirst} bytes later and whose last entry ends
     * {@code trimLast} bytes earlier ({@code fix_peer_sgls}); this table is unchanged.
     */
    public SgTable trimmed(long trimFirst, long trimLast) {
        if (trimFirst == 0 && trimLast == 0) {
            return this;
        }
        long[] a = dmaAddress.clone();
        long[] l = length.clone();
        int last = l.length - 1;
        if (trimFirst < 0 || trimLast < 0 || trimFirst >= l[0] || trimLast >= l[last]
                || (last == 0 && trimFirst + trimLast >= l[0])) {
            throw new IllegalArgumentException("sg_table: cannot trim " + trimFirst + "/" + trimLast + " bytes from " + this);
        }
        a[0] += trimFirst;
        l[0] -= trimFirst;
        l[last] -= trimLast;
        return new SgTable(a, l);
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("sg_table[").append(nents()).append(" entries, ").append(totalLength).append(" bytes");
        for (int i = 0; i < Math.min(4, nents()); i++) {
            sb.append(String.format(", 0x%x+%d", dmaAddress[i], length[i]));
        }
        return sb.append(nents() > 4 ? ", ...]" : "]").toString();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof SgTable t && Arrays.equals(dmaAddress, t.dmaAddress) && Arrays.equals(length, t.length);
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(dmaAddress) + Arrays.hashCode(length);
    }
}
