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
 *
 * <p>A <b>UMR-enabled</b> entry (mlx5's {@code umr_en}) keeps the on-demand kind's per-page MTT with a
 * fixed capacity (the {@code translations_octword_size} it was created with) and lets a UMR work
 * request change what the hardware lets UMR change: the translations, start, length, page size,
 * PD, access rights, key byte and the free state (a free entry admits no access). Every such change
 * happens under the write lock; one that changes the key's context (a non-zero mkey mask) advances
 * {@link #gen}: a transfer records the generation it checked its rights against ({@link #admit})
 * and {@link DmaMover} re-checks it under the read lock, so a transfer admitted before such a UMR
 * never moves a byte after it (the rights it was checked against may no longer hold). A UMR that
 * writes only translations keeps the generation: the transfer re-checks each page's presence under
 * the read lock, so it moves through the new entries or misses on a zapped one.
 */
final class Mpt {

    /** VALID admits accesses; FREE (a UMR-enabled entry disabled or created free) and REVOKED (destroyed) do not. */
    enum State { VALID, FREE, REVOKED }

    private static final java.util.concurrent.atomic.AtomicLong SERIAL = new java.util.concurrent.atomic.AtomicLong();
    /** Unique across devices (keys are only unique per device): the lock order of transfers. */
    final long serial = SERIAL.incrementAndGet();
    /**
     * The attributes below change only on a UMR-enabled entry, under the write lock, followed by a
     * {@link #gen} advance (a volatile write that publishes them). Readers outside the lock read
     * {@link #gen} first ({@link #admit}); what they read may already be newer, which the
     * generation check under the read lock catches.
     */
    volatile int key;
    int pdn;
    long start;
    long length;
    int access;
    /** Advanced by every UMR that changes the key's context (a non-zero mkey mask); see the class comment. */
    volatile int gen;
    /** {@code umr_en}: UMR work requests may change this entry. */
    final boolean umrEn;
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
    int pageShift;

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
        umrEn = false;
    }

    /** An on-demand entry: nothing present until {@link #update}. */
    Mpt(int key, int pdn, long start, long length, int access, int pageShift) {
        this(key, pdn, start, length, access, pageShift, pagesOf(key, start, length, pageShift), false);
    }

    /**
     * A per-page entry with room for {@code capacity} MTT entries, all not present; with
     * {@code umrEn}, UMR may change it, and {@code free} creates it disabled (mlx5's
     * {@code free = 1}: the mkey cache's entries, filled and enabled by UMR later).
     */
    Mpt(int key, int pdn, long start, long length, int access, int pageShift, int capacity, boolean umrEn) {
        this.key = key;
        this.pdn = pdn;
        this.start = start;
        this.length = length;
        this.access = access;
        this.pageShift = pageShift;
        this.umrEn = umrEn;
        blockOff = null;
        blockIova = null;
        if (capacity < 1) {
            throw new HwCommandException(HwCommandException.STAT_BAD_SIZE, String.format("mkey 0x%x: an MTT of %d entries", key, capacity));
        }
        pages = capacity;
        pageMtt = new long[(pages + CHUNK - 1) >>> CHUNK_SHIFT][];
    }

    /** MTT entries an on-demand range needs (one per page it touches). */
    static int pagesOf(int key, long start, long length, int pageShift) {
        long n = pagesSpanned(start, length, pageShift);
        if (n > Integer.MAX_VALUE) {
            throw new HwCommandException(HwCommandException.STAT_BAD_SIZE, String.format(
                    "mkey 0x%x: %d pages of 2^%d bytes exceed the 2^31 MTT entries of one mkey", key, n, pageShift));
        }
        return (int) n;
    }

    /**
     * The entry's generation if it admits an access of {@code len} bytes at {@code va} from PD
     * {@code pdn} with all of {@code perm}; -1 if not. The generation is read first, so a UMR
     * racing the checks is caught by the transfer's re-check under the read lock.
     */
    int admit(int pdn, long va, long len, int perm) {
        int g = gen;
        if (state != State.VALID || this.pdn != pdn || (access & perm) != perm || !contains(va, len)) {
            return -1;
        }
        return g;
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
        int bad = misaligned(mtt, n, pageShift);
        if (bad >= 0) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format(
                    "mkey 0x%x: UMR entry %d (0x%x) is not a %d-byte aligned IOVA with read/write bits", key, first + bad, mtt[bad], 1L << pageShift));
        }
        long s = lock.writeLock();
        try {
            put(first, mtt, n);
        } finally {
            lock.unlockWrite(s);
        }
    }

    /** The first of {@code mtt[0..n)} that is not a {@code 2^shift}-aligned IOVA with read/write bits, or -1. */
    private static int misaligned(long[] mtt, int n, int shift) {
        for (int i = 0; i < n; i++) {
            if ((mtt[i] & ((1L << shift) - 1) & ~(MTT_READ | MTT_WRITE)) != 0) {
                return i;
            }
        }
        return -1;
    }

    /** MTT entries {@code [first, first+n)} become {@code mtt[0..n)}, chunks allocated on first use. Caller holds the write lock. */
    private void put(int first, long[] mtt, int n) {
        assert lock.isWriteLocked();
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
    }

    /** Pages of {@code 2^shift} bytes that {@code [start, start+length)} touches (at least 1). */
    static long pagesSpanned(long start, long length, int shift) {
        return length <= 0 ? 1 : (start + length - 1 >>> shift) - (start >>> shift) + 1;
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

    /**
     * A page-translated entry, read lock held: bytes from {@code va} (at most {@code max}) through
     * the following pages while each is present with {@code bits} and its IOVA follows on the
     * previous one's, so one DMA moves them; at least the rest of {@code va}'s page when that page
     * is present with {@code bits}.
     */
    long mappedRun(long va, long max, long bits) {
        long psz = 1L << pageShift;
        long r = psz - (va & (psz - 1));
        int p = page(va);
        long e = entry(p);
        while (r < max && p + 1 < pages) {
            long next = entry(p + 1);
            if ((next & bits) != bits || (next & ~(MTT_READ | MTT_WRITE)) != (e & ~(MTT_READ | MTT_WRITE)) + psz) {
                break;
            }
            r += psz;
            p++;
            e = next;
        }
        return Math.min(r, max);
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

    /**
     * Executes a UMR work request on this entry: checks, then under the write lock the new
     * attributes, translations and free state, all or nothing. Returns when no DMA admitted before
     * it is in flight (the write lock waits for the read locks of transfers in progress), so a UMR
     * that disables the entry or zaps translations is a revocation the driver can rely on. The
     * translations ({@code xlt}, already fetched) are MTT entries for
     * {@code [u.xltOffset, u.xltOffset + u.xltEntries)}.
     */
    Outcome umr(UmrWqe u, long[] xlt) {
        if (!umrEn) {
            return Outcome.LOC_PROT_ERR; // created without umr_en: only commands may change it
        }
        long m = u.mask;
        long s = lock.writeLock();
        try {
            if (state == State.REVOKED) {
                return Outcome.LOC_PROT_ERR;
            }
            if ((u.flags & UmrWqe.CHECK_MASK) == UmrWqe.FLAG_CHECK_FREE && state != State.FREE
                    || (u.flags & UmrWqe.CHECK_MASK) == UmrWqe.FLAG_CHECK_NOT_FREE && state == State.FREE) {
                return Outcome.LOC_PROT_ERR;
            }
            int shift = (m & UmrWqe.MASK_PAGE_SIZE) != 0 ? u.logPageSize : pageShift;
            long st = (m & UmrWqe.MASK_START_ADDR) != 0 ? u.start : start;
            long len = (m & UmrWqe.MASK_LEN) != 0 ? (u.length64 ? Long.MAX_VALUE - st : u.length) : length;
            State next = (m & UmrWqe.MASK_FREE) != 0 ? (u.free ? State.FREE : State.VALID) : state;
            if (shift < 12 || shift > 30 || len < 0 || st + len < st) {
                return Outcome.LOC_QP_OP_ERR;
            }
            if (next == State.VALID && pagesSpanned(st, len, shift) > pages) {
                return Outcome.LOC_QP_OP_ERR; // the range needs more MTT entries than the entry was created with
            }
            if (u.xltEntries > 0 && (u.xltOffset < 0 || u.xltOffset > pages - (long) u.xltEntries)) {
                return Outcome.LOC_QP_OP_ERR;
            }
            if (misaligned(xlt, u.xltEntries, shift) >= 0) {
                return Outcome.LOC_QP_OP_ERR; // not an address aligned to the page size
            }
            // all checked: apply
            pageShift = shift;
            start = st;
            length = len;
            if ((m & UmrWqe.MASK_PD) != 0) {
                pdn = u.pdn;
            }
            int a = access;
            a = bit(a, m, UmrWqe.MASK_LR, u.perm, HcaDevice.PERM_LOCAL_READ);
            a = bit(a, m, UmrWqe.MASK_LW, u.perm, HcaDevice.PERM_LOCAL_WRITE);
            a = bit(a, m, UmrWqe.MASK_RR, u.perm, HcaDevice.PERM_REMOTE_READ);
            a = bit(a, m, UmrWqe.MASK_RW, u.perm, HcaDevice.PERM_REMOTE_WRITE);
            a = bit(a, m, UmrWqe.MASK_A, u.perm, HcaDevice.PERM_ATOMIC);
            access = a;
            if ((m & UmrWqe.MASK_KEY) != 0) {
                key = key & ~0xff | u.keyByte & 0xff;
            }
            put((int) u.xltOffset, xlt, u.xltEntries);
            state = next;
            if (m != 0) {
                // the key's context changed: what transfers were admitted against may no longer hold.
                // A translation-only UMR (an ODP fault, prefetch or zap) keeps the generation: a
                // transfer in progress meets the new entries page by page under the read lock (a
                // zapped page is a miss there, never a stale translation)
                gen++;
            }
            return Outcome.SUCCESS;
        } finally {
            lock.unlockWrite(s);
        }
    }

    private static int bit(int access, long mask, long maskBit, int from, int perm) {
        return (mask & maskBit) == 0 ? access : access & ~perm | from & perm;
    }

    /** Stops all DMA through this entry; returns when none is in flight. */
    void revoke() {
        long s = lock.writeLock();
        state = State.REVOKED;
        lock.unlockWrite(s);
    }
}
