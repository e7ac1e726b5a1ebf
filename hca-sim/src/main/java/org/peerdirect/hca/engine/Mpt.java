package org.peerdirect.hca.engine;

import java.util.Arrays;
import java.util.concurrent.locks.StampedLock;

import org.peerdirect.kernel.dma.DmaPort;

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
 * <p>An <b>indirect</b> entry (mlx5's KSM access mode, the parent of an implicit ODP MR) holds, per
 * fixed-size block of {@code 2^pageShift} bytes, the key of another entry and the address in it
 * where the block starts ({@code struct mlx5_ksm}); a block without a target (the device's null
 * mkey, or never written) is a translation miss, raised as a page fault on this entry's key like
 * a missing page of an on-demand entry. An access resolves the block under this entry's read
 * lock, then takes the target's read lock ({@link DmaMover}): indirect entries are always locked
 * before direct ones, so the two-level order cannot cycle (a target is never indirect).
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
    /** KSM: {@link #pageMtt} holds target keys ({@link #KSM_PRESENT} set), {@link #ksmVa} their addresses. */
    final boolean indirect;
    /** Indirect only: per block, the address in the target entry where the block starts; chunked as {@link #pageMtt}. */
    private final long[][] ksmVa;
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
    /** An indirect entry's block has a target: its {@link #pageMtt} value is this bit or-ed with the target key. */
    static final long KSM_PRESENT = 1L << 32;

    Mpt(int key, int pdn, long start, long length, int access, long[] mttIova, long[] mttLength) {
        this(key, pdn, start, length, access, mttIova, mttLength, null);
    }

    /**
     * A pinned entry whose IOVAs are addresses of {@code space} rather than of the device's IOMMU
     * domain (null): the BlueField-3's DPA memory, which the NIC reaches directly
     * ({@code flexio_device_mkey_create} over a process DUMEM).
     */
    Mpt(int key, int pdn, long start, long length, int access, long[] mttIova, long[] mttLength, DmaPort space) {
        this.space = space;
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
        ksmVa = null;
        pages = 0;
        pageShift = 12;
        umrEn = false;
        indirect = false;
    }

    /** An on-demand entry: nothing present until {@link #update}. */
    Mpt(int key, int pdn, long start, long length, int access, int pageShift) {
        this(key, pdn, start, length, access, pageShift, pagesOf(key, start, length, pageShift), false, false);
    }

    /**
     * A per-page entry with room for {@code capacity} MTT entries, all not present; with
     * {@code umrEn}, UMR may change it, and {@code free} creates it disabled (mlx5's
     * {@code free = 1}: the mkey cache's entries, filled and enabled by UMR later). With
     * {@code indirect}, the entries are KSM blocks of {@code 2^pageShift} bytes, none with a target.
     */
    Mpt(int key, int pdn, long start, long length, int access, int pageShift, int capacity, boolean umrEn, boolean indirect) {
        this.key = key;
        this.pdn = pdn;
        this.start = start;
        this.length = length;
        this.access = access;
        this.pageShift = pageShift;
        this.umrEn = umrEn;
        this.indirect = indirect;
        blockOff = null;
        blockIova = null;
        if (capacity < 1) {
            throw new HwCommandException(HwCommandException.STAT_BAD_SIZE, String.format("mkey 0x%x: an MTT of %d entries", key, capacity));
        }
        pages = capacity;
        pageMtt = new long[(pages + CHUNK - 1) >>> CHUNK_SHIFT][];
        ksmVa = indirect ? new long[pageMtt.length][] : null;
        space = null;
    }

    /**
     * The memory space the entry's IOVAs address: null for the device's IOMMU domain (host memory,
     * audited), else a device-local space (DPA memory; pinned entries only). Final: transfers
     * read it without the lock.
     */
    final DmaPort space;

    /** The port this entry's IOVAs are reached through: its {@link #space}, else the device's {@code domain}. */
    DmaPort port(DmaPort domain) {
        return space != null ? space : domain;
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
        if (indirect) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format("mkey 0x%x: an indirect entry takes KSM entries by UMR only", key));
        }
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

    /**
     * MTT entries {@code [first, first+n)} become {@code mtt[0..n)}, chunks allocated on first use;
     * for an indirect entry {@code mtt} holds pairs (target key or 0, address). Caller holds the write lock.
     */
    private void put(int first, long[] mtt, int n) {
        assert lock.isWriteLocked();
        if (indirect) {
            for (int i = 0; i < n; i++) {
                int p = first + i;
                long k = mtt[2 * i];
                long[] c = pageMtt[p >>> CHUNK_SHIFT];
                if (c == null) {
                    if (k == 0) {
                        continue;
                    }
                    c = pageMtt[p >>> CHUNK_SHIFT] = new long[chunkLength(p)];
                    ksmVa[p >>> CHUNK_SHIFT] = new long[chunkLength(p)];
                }
                c[p & (CHUNK - 1)] = k == 0 ? 0 : KSM_PRESENT | k & 0xffff_ffffL;
                ksmVa[p >>> CHUNK_SHIFT][p & (CHUNK - 1)] = mtt[2 * i + 1];
            }
            return;
        }
        for (int i = 0; i < n; i++) {
            int p = first + i;
            long[] c = pageMtt[p >>> CHUNK_SHIFT];
            if (c == null) {
                if (mtt[i] == 0) {
                    continue;
                }
                c = pageMtt[p >>> CHUNK_SHIFT] = new long[chunkLength(p)];
            }
            c[p & (CHUNK - 1)] = mtt[i];
        }
    }

    /** Entries of the chunk holding page {@code p}: {@link #CHUNK}, the last one only what the key's pages reach (a 2 MiB key costs 4 KiB, not 32). */
    private int chunkLength(int p) {
        return Math.min(CHUNK, pages - (p & -CHUNK));
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

    /**
     * Indirect entry, read lock held, {@code va} inside the range: the key of the block's target,
     * or 0 when the block has none (a miss: the access faults on this entry's key), or -1 when
     * {@code va} lies beyond the entry's blocks (a protection error).
     */
    long target(long va) {
        long b = (va - start) >>> pageShift;
        if (b >= pages) {
            return -1;
        }
        long e = entry((int) b);
        return e == 0 ? 0 : e & 0xffff_ffffL;
    }

    /** Indirect entry, read lock held, the block of {@code va} has a target: the address of {@code va} in the target. */
    long targetVa(long va) {
        int b = (int) ((va - start) >>> pageShift);
        return ksmVa[b >>> CHUNK_SHIFT][b & (CHUNK - 1)] + (va - start - ((long) b << pageShift));
    }

    /** Indirect entry: bytes from {@code va} to the end of its block. */
    long blockLeft(long va) {
        long in = va - start & (1L << pageShift) - 1;
        return (1L << pageShift) - in;
    }

    /**
     * Direct entry, read lock held, [va, va+len) inside the range: the flushing reads of an RDMA
     * FLUSH, {@link DmaPort#flush} over the IOVAs behind the range's present pages, one call per
     * run whose IOVAs follow on. An on-demand entry's absent pages are skipped (the device wrote
     * nothing there it has not made visible: a zap waits for the DMA through the page), whole
     * absent MTT chunks at once.
     */
    void flush(long va, long len, DmaPort port) {
        long end = va + len;
        long runIova = 0;
        long runLen = 0;
        long p = va;
        while (p < end) {
            long n;
            long iova = -1;
            if (pageMtt == null) {
                long off = p - (start & -4096L);
                int i = block(off);
                n = Math.min(end - p, blockOff[i + 1] - off);
                iova = blockIova[i] + (off - blockOff[i]);
            } else {
                int pg = page(p);
                long in = p & ((1L << pageShift) - 1);
                n = Math.min(end - p, (1L << pageShift) - in);
                long[] c = pageMtt[pg >>> CHUNK_SHIFT];
                if (c == null) {
                    long nextChunkVa = ((start >>> pageShift) + ((long) ((pg >>> CHUNK_SHIFT) + 1) << CHUNK_SHIFT)) << pageShift;
                    n = Math.min(end - p, nextChunkVa - p);
                } else {
                    long e = c[pg & (CHUNK - 1)];
                    if (e != 0) {
                        iova = (e & ~(MTT_READ | MTT_WRITE)) + in;
                    }
                }
            }
            if (iova >= 0 && runLen > 0 && runIova + runLen == iova) {
                runLen += n;
            } else {
                if (runLen > 0) {
                    port.flush(runIova, runLen);
                }
                runIova = iova;
                runLen = iova >= 0 ? n : 0;
            }
            p += n;
        }
        if (runLen > 0) {
            port.flush(runIova, runLen);
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
     * translations ({@code xlt}, already fetched) are the {@code n} MTT entries from {@code first}
     * (for an indirect entry, KSM pairs of target key, 0 for none, and address).
     */
    Outcome umr(UmrWqe u, long[] xlt, long first, int n) {
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
            // an indirect entry may span more than its blocks (length64 over the address space):
            // an access beyond the last block is a protection error, not a reason to refuse the UMR
            if (!indirect && next == State.VALID && pagesSpanned(st, len, shift) > pages) {
                return Outcome.LOC_QP_OP_ERR; // the range needs more MTT entries than the entry was created with
            }
            if (n > 0 && (first < 0 || first > pages - (long) n)) {
                return Outcome.LOC_QP_OP_ERR;
            }
            if (indirect ? ksmMisaligned(xlt, n) : misaligned(xlt, n, shift) >= 0) {
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
            put((int) first, xlt, n);
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

    /** KSM: "IOVA must be page aligned in KSM mode" (mlx5_ib); a target's address is a 4 KiB-aligned address. */
    private static boolean ksmMisaligned(long[] pairs, int n) {
        for (int i = 0; i < n; i++) {
            if ((pairs[2 * i + 1] & 4095) != 0) {
                return true;
            }
        }
        return false;
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
