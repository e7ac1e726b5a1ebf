package org.peerdirect.hca.engine;

import java.util.Arrays;
import java.util.concurrent.locks.StampedLock;

/**
 * One memory protection table entry ({@code struct mlx4_mpt_entry}, mlx5's mkey context): key,
 * protection domain, the virtual range, access rights, and the translation of the range to IOVAs.
 * An access holds the entry's read lock for its DMA; revocation and translation updates take the
 * write lock, so when {@link #revoke} or {@link #zap} returns no DMA through what they removed is
 * in flight and none starts.
 *
 * <p>Two translation kinds:
 * <ul>
 * <li><b>pinned</b> (the MTT of {@code SW2HW_MPT}): DMA blocks with their offsets, fixed for the
 * entry's life;</li>
 * <li><b>on-demand</b> (an ODP mkey, ConnectX-4+): one MTT entry per page holding the page's IOVA
 * with the read and write bits of mlx5's MTT ({@code MLX5_IB_MTT_READ}/{@code _WRITE}); empty at
 * creation, filled and zapped by the driver ({@code UMR}). An access to a page without the bit it
 * needs is a translation miss: the engine raises a page-fault event instead of an error.</li>
 * </ul>
 */
final class Mpt {

    enum State { VALID, REVOKED }

    private static final java.util.concurrent.atomic.AtomicLong SERIAL = new java.util.concurrent.atomic.AtomicLong();
    /** Unique across devices (keys are only unique per device): the lock order of transfers. */
    final long serial = SERIAL.incrementAndGet();
    final int key;
    final int pdn;
    final long start;
    final long length;
    final int access;
    /** Offset of block i from the 4 KiB-aligned start, one extra for the end. */
    private final long[] blockOff;
    private final long[] blockIova;
    final StampedLock lock = new StampedLock();
    volatile State state = State.VALID;
    /**
     * On-demand only: per page, {@code iova | MTT_READ | MTT_WRITE}, 0 when not present; in chunks
     * of {@link #CHUNK} entries allocated by the first update that touches them, so an entry costs
     * what was made present, not its length (the hardware keeps MTTs in host memory the same way).
     * Guarded by {@link #lock}.
     */
    private final long[][] pageMtt;
    private final int pages;
    private static final int CHUNK_SHIFT = 12;
    static final int CHUNK = 1 << CHUNK_SHIFT;
    /** On-demand only: log2 of the page size the MTT entries cover. */
    final int pageShift;

    /** MTT entry bits of an on-demand entry ({@code MLX5_IB_MTT_READ}, {@code MLX5_IB_MTT_WRITE}). */
    static final long MTT_READ = 1;
    static final long MTT_WRITE = 2;

    Mpt(int key, int pdn, long start, long length, int access, long[] mttIova, long[] mttLength) {
        this.key = key;
        this.pdn = pdn;
        this.start = start;
        this.length = length;
        this.access = access;
        blockOff = new long[mttIova.length + 1];
        blockIova = mttIova.clone();
        for (int i = 0; i < mttIova.length; i++) {
            blockOff[i + 1] = blockOff[i] + mttLength[i];
        }
        pageMtt = null;
        pages = 0;
        pageShift = 12;
    }

    /** An on-demand entry: nothing present until {@link #update}. */
    Mpt(int key, int pdn, long start, long length, int access, int pageShift) {
        this.key = key;
        this.pdn = pdn;
        this.start = start;
        this.length = length;
        this.access = access;
        this.pageShift = pageShift;
        blockOff = null;
        blockIova = null;
        long first = start >>> pageShift;
        long end = (start + length + (1L << pageShift) - 1) >>> pageShift;
        if (end - first > Integer.MAX_VALUE) {
            throw new HwCommandException(HwCommandException.STAT_BAD_SIZE, String.format(
                    "mkey 0x%x: %d pages of 2^%d bytes exceed the 2^31 MTT entries of one mkey", key, end - first, pageShift));
        }
        pages = (int) Math.max(1, end - first);
        pageMtt = new long[(pages + CHUNK - 1) >>> CHUNK_SHIFT][];
    }

    private long entry(int p) {
        long[] c = pageMtt[p >>> CHUNK_SHIFT];
        return c == null ? 0 : c[p & (CHUNK - 1)];
    }

    boolean onDemand() {
        return pageMtt != null;
    }

    /** MTT entries of an on-demand entry. */
    int pages() {
        return pages;
    }

    private int page(long va) {
        return (int) ((va >>> pageShift) - (start >>> pageShift));
    }

    /**
     * Whether the page of {@code va} is present with {@code bits} ({@link #MTT_READ} and/or
     * {@link #MTT_WRITE}); always true for a pinned entry. Caller holds the read lock.
     */
    boolean mapped(long va, long bits) {
        return pageMtt == null || (entry(page(va)) & bits) == bits;
    }

    /**
     * {@code UMR} of translations: MTT entries {@code [first, first+n)} become {@code mtt[i]}
     * (a page-aligned IOVA with the read and write bits, or 0 for not present).
     */
    void update(int first, long[] mtt, int n) {
        checkRange(first, n);
        if (n > mtt.length) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format("mkey 0x%x: UMR of %d entries from a list of %d", key, n, mtt.length));
        }
        for (int i = 0; i < n; i++) {
            if ((mtt[i] & ((1L << pageShift) - 1) & ~(MTT_READ | MTT_WRITE)) != 0) {
                throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format(
                        "mkey 0x%x: UMR entry %d (0x%x) is not a %d-byte aligned IOVA with read/write bits", key, first + i, mtt[i], 1L << pageShift));
            }
        }
        long s = lock.writeLock();
        try {
            for (int i = 0; i < n; i++) {
                int p = first + i;
                long[] c = pageMtt[p >>> CHUNK_SHIFT];
                if (c == null) {
                    if (mtt[i] == 0) {
                        continue;
                    }
                    c = pageMtt[p >>> CHUNK_SHIFT] = new long[CHUNK];
                }
                c[p & (CHUNK - 1)] = mtt[i];
            }
        } finally {
            lock.unlockWrite(s);
        }
    }

    /**
     * {@code UMR} with zap: MTT entries {@code [first, first+n)} become not present. Returns when
     * no DMA through them is in flight: after it, the pages' IOVAs may be unmapped.
     */
    void zap(int first, int n) {
        checkRange(first, n);
        long s = lock.writeLock();
        try {
            for (int p = first; p < first + n; p++) {
                long[] c = pageMtt[p >>> CHUNK_SHIFT];
                if (c != null) {
                    c[p & (CHUNK - 1)] = 0;
                }
            }
        } finally {
            lock.unlockWrite(s);
        }
    }

    /** MTT entries present (for the driver's counters and the tests). */
    int present() {
        long s = lock.readLock();
        try {
            int n = 0;
            for (long[] c : pageMtt) {
                for (int i = 0; c != null && i < c.length; i++) {
                    n += c[i] != 0 ? 1 : 0;
                }
            }
            return n;
        } finally {
            lock.unlockRead(s);
        }
    }

    private void checkRange(int first, int n) {
        if (pageMtt == null) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format("mkey 0x%x: UMR of translations on an entry with a fixed MTT", key));
        }
        if (first < 0 || n < 0 || first > pages - n) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format("mkey 0x%x: UMR of entries %d..%d outside its %d entries",
                    key, first, (long) first + n, pages));
        }
    }

    boolean contains(long va, long len) {
        return len >= 0 && va >= start && va + len <= start + length && va + len >= va;
    }

    private int block(long off) {
        if (blockIova.length == 1) {
            return 0;
        }
        int i = Arrays.binarySearch(blockOff, off);
        return i >= 0 ? i : -i - 2;
    }

    /** IOVA of {@code va}; caller checked {@link #contains} and, when on demand, {@link #mapped} under the read lock. */
    long iova(long va) {
        if (pageMtt != null) {
            return (entry(page(va)) & ~(MTT_READ | MTT_WRITE)) + (va & ((1L << pageShift) - 1));
        }
        long off = va - (start & -4096L);
        int i = block(off);
        return blockIova[i] + (off - blockOff[i]);
    }

    /** Bytes from {@code va} contiguous in IOVA space (for an on-demand entry: to the end of its page). */
    long contiguous(long va) {
        if (pageMtt != null) {
            return (1L << pageShift) - (va & ((1L << pageShift) - 1));
        }
        long off = va - (start & -4096L);
        int i = block(off);
        return blockOff[i + 1] - off;
    }

    /** Stops all DMA through this entry; returns when none is in flight. */
    void revoke() {
        long s = lock.writeLock();
        state = State.REVOKED;
        lock.unlockWrite(s);
    }
}
