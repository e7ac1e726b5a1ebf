package org.peerdirect.mlx5.ib;

import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.MmuNotifierRange;

/**
 * An explicit ODP MR ({@code create_user_odp_mr}): a UMR-enabled MTT mkey over an ODP umem, one MTT
 * entry per 4 KiB page, present only where a device fault, a prefetch or the registration's
 * snapshot mapped it. Its MTT entries are exactly the umem's DMA entries ({@code MLX5_IB_MTT_READ}
 * and {@code _WRITE} are the umem's {@code ODP_READ_ALLOWED} and {@code ODP_WRITE_ALLOWED} bits), so
 * the device's translation is never wider than what the umem mapped: a page present for the NIC is
 * present for the CPU, never the converse.
 *
 * <p>Paths, with kernel names:
 * <ul>
 * <li>{@link #pagefault} ({@code pagefault_real_mr}): {@code map_dma_and_lock}, then one UMR writing
 * the range's entries ({@code mlx5r_umr_update_xlt}), then the umem mutex is released;</li>
 * <li>{@link #invalidate} ({@code mlx5_ib_invalidate_range}): under the umem mutex, the present
 * entries of the range zapped by UMR (when it completes, no DMA through them is in flight), then
 * unmapped;</li>
 * <li>{@link #deregMr}: the key leaves {@code odp_mkeys}, the use count drains, then under the umem
 * mutex the MR is marked dead (later invalidations only unmap) and the mkey revoked by UMR (not
 * zapped entry by entry: a free mkey admits nothing), the umem released, and the mkey cached or
 * destroyed.</li>
 * </ul>
 *
 * <p>Lock rules: the umem mutex orders faults, invalidations and the dead flag; the use count's lock ({@link Mlx5MkeyUse})
 * only pairs the use count with the deregistration's wait. UMRs run under the umem mutex, never
 * the other way round.
 */
final class Mlx5OdpMr implements Mlx5MkeyMr, Mlx5Odp.OdpMkey {

    /** {@code MLX5_PF_FLAGS_DOWNGRADE}: map read-only even if the umem is writable. */
    static final int PF_FLAGS_DOWNGRADE = 1;
    /** {@code MLX5_PF_FLAGS_SNAPSHOT}: no CPU fault, only what is present now. */
    static final int PF_FLAGS_SNAPSHOT = 1 << 1;
    /** Counts the pages as prefetched ({@code page_prefetch}), not faulted. */
    static final int PF_FLAGS_PREFETCH = 1 << 3;
    /** Registrations up to this length take the snapshot of resident pages ({@code mlx5_ib_init_odp_mr}); longer ones start empty. */
    static final long SNAPSHOT_MAX = 1L << 30;

    private final Mlx5IbPd pd;
    final IbUmemOdp umem;
    final int mkey;
    /** The cache key and whether the mkey came from the cache (as {@link Mlx5IbMr}). */
    private final Mlx5MkeyCache.RbKey cacheKey;
    private final boolean fromCache;
    private final Mlx5Odp odp;

    /** Guarded by the umem mutex: set once the mkey is revoked; invalidations then only unmap. */
    private boolean dead;
    /** Faults working on this MR ({@code mmkey.usecount}). */
    private final Mlx5MkeyUse use = new Mlx5MkeyUse();
    private volatile boolean released;

    /** The implicit MR this is a child of (over one of its gigabytes), or null for an explicit ODP MR. */
    final Mlx5ImplicitMr parent;
    /** This MR's restrack counters; a child's also count into its parent's. */
    final Stats stats;

    /**
     * The per-MR counters of restrack ({@code mlx5/restrack.c}), in pages except the
     * {@code *_handled} ones (events); each update also goes to {@code up} (an implicit MR's sum).
     */
    static final class Stats {
        final AtomicLong pageFaults = new AtomicLong();
        final AtomicLong pageFaultsHandled = new AtomicLong();
        final AtomicLong pageInvalidations = new AtomicLong();
        final AtomicLong pageInvalidationsHandled = new AtomicLong();
        final AtomicLong pagePrefetch = new AtomicLong();
        private final Stats up;

        Stats(Stats up) {
            this.up = up;
        }

        void faulted(long pages) {
            pageFaults.addAndGet(pages);
            pageFaultsHandled.incrementAndGet();
            if (up != null) {
                up.faulted(pages);
            }
        }

        void prefetched(long pages) {
            pagePrefetch.addAndGet(pages);
            if (up != null) {
                up.prefetched(pages);
            }
        }

        void invalidated(long pages) {
            pageInvalidations.addAndGet(pages);
            pageInvalidationsHandled.incrementAndGet();
            if (up != null) {
                up.invalidated(pages);
            }
        }

        /** As {@code rdma res show mr} prints them. */
        @Override
        public String toString() {
            return String.format("page_faults %d page_faults_handled %d page_invalidations %d page_invalidations_handled %d page_prefetch %d",
                    pageFaults.get(), pageFaultsHandled.get(), pageInvalidations.get(), pageInvalidationsHandled.get(), pagePrefetch.get());
        }
    }

    Mlx5OdpMr(Mlx5IbPd pd, IbUmemOdp umem, int mkey, Mlx5MkeyCache.RbKey cacheKey, boolean fromCache, Mlx5Odp odp) {
        this(pd, umem, mkey, cacheKey, fromCache, odp, null);
    }

    Mlx5OdpMr(Mlx5IbPd pd, IbUmemOdp umem, int mkey, Mlx5MkeyCache.RbKey cacheKey, boolean fromCache, Mlx5Odp odp, Mlx5ImplicitMr parent) {
        this.pd = pd;
        this.umem = umem;
        this.mkey = mkey;
        this.cacheKey = cacheKey;
        this.fromCache = fromCache;
        this.odp = odp;
        this.parent = parent;
        this.stats = new Stats(parent == null ? null : parent.stats);
    }

    /** The MTT index of the 4 KiB page holding {@code va}. */
    private long index(long va) {
        return (va - umem.start()) >>> 12;
    }

    /** The 4 KiB pages [va, va+len) touches. */
    private long pages(long va, long len) {
        return index(va + len - 1) - index(va) + 1;
    }

    /** MTT entry {@code i}: the umem's DMA entry of the page (or of its 2 MiB granule, offset to the page), 0 when not mapped. */
    long mttEntry(long i) {
        long va = umem.start() + (i << 12);
        if (va >= umem.end()) {
            return 0;
        }
        long granule = 1L << umem.pageShift();
        long e = umem.dmaEntry(va & -granule);
        if (e == 0) {
            return 0;
        }
        return (e & IbUmemOdp.ODP_DMA_ADDR_MASK) + (va & granule - 1 & ~4095L) | e & ~IbUmemOdp.ODP_DMA_ADDR_MASK;
    }

    /**
     * {@code pagefault_mr} then {@code pagefault_real_mr}: maps [va, va+len) and writes the
     * entries by UMR. A device fault is permissive (a range running past the MR, as the prefetch
     * ahead of an RDMA fault, is clipped to it); a prefetch the application asked for is not
     * (past the end of the umem's last page is EFAULT), as the kernel's {@code permissive_fault}.
     *
     * @return pages mapped now
     * @throws KernelException EFAULT when {@code va} is outside the MR, a strict range runs past it,
     *         or a page cannot be mapped (not in the address space, or without the access)
     */
    @Override
    public long pagefault(long va, long len, int flags, boolean permissive) {
        long start = umem.address();
        long end = start + umem.length();
        if (va < start || va >= end) {
            throw new KernelException(Errno.EFAULT, String.format("mkey 0x%x: 0x%x is outside the MR [0x%x, 0x%x)", mkey, va, start, end));
        }
        if (!permissive && umem.end() - va < len) {
            throw new KernelException(Errno.EFAULT, String.format("mkey 0x%x: [0x%x, +%d) runs past the MR [0x%x, 0x%x)", mkey, va, len, start, end));
        }
        long bcnt = Math.min(len, end - va);
        long mask = IbUmemOdp.ODP_READ_ALLOWED | (umem.writable() && (flags & PF_FLAGS_DOWNGRADE) == 0 ? IbUmemOdp.ODP_WRITE_ALLOWED : 0);
        long np = umem.mapDmaAndLock(va, bcnt, mask, (flags & PF_FLAGS_SNAPSHOT) == 0);
        try {
            if (dead) {
                throw new KernelException(Errno.EFAULT, String.format("mkey 0x%x: the MR is being deregistered", mkey));
            }
            odp.dev.umr().updateXlt(mkey, index(va), pages(va, bcnt), this::mttEntry);
        } finally {
            umem.unlock();
        }
        long pages = pages(va, bcnt);
        if ((flags & PF_FLAGS_PREFETCH) != 0) {
            stats.prefetched(pages);
            odp.prefetchedPages.addAndGet(pages);
        } else {
            stats.faulted(pages);
        }
        return np;
    }

    /**
     * {@code mlx5_ib_init_odp_mr}: the pages resident now are made present without faulting
     * ({@code MLX5_PF_FLAGS_SNAPSHOT}); the mkey was enabled empty just before. Skipped above
     * {@link #SNAPSHOT_MAX} (the walk's page list would be as long as the MR).
     */
    void snapshot() {
        if (umem.length() > SNAPSHOT_MAX) {
            return;
        }
        umem.mapDmaAndLock(umem.address(), umem.length(), IbUmemOdp.ODP_READ_ALLOWED | (umem.writable() ? IbUmemOdp.ODP_WRITE_ALLOWED : 0),
                false);
        try {
            long n = (umem.end() - umem.start()) >>> 12;
            for (long[] run = presentRun(0, n); run != null; run = presentRun(run[1], n)) { // one UMR per present run
                odp.dev.umr().updateXlt(mkey, run[0], run[1] - run[0], this::mttEntry);
            }
        } finally {
            umem.unlock();
        }
    }

    /** {@code mlx5_ib_invalidate_range}: zap what is present in the range, wait for DMA, unmap. */
    boolean invalidate(IbUmemOdp u, MmuNotifierRange range, long curSeq) {
        long start = Math.max(range.start(), umem.start());
        long end = Math.min(range.end(), umem.end());
        umem.lock();
        try {
            umem.setSeq(curSeq);
            if (start >= end || umem.mappedPages() == 0) {
                return true;
            }
            long zapped = 0;
            if (!dead) {
                try {
                    zapped = zap(index(start), index(end - 1) + 1);
                } catch (KernelException e) {
                    // as mlx5_ib_invalidate_range, which ignores mlx5r_umr_update_xlt's error: the
                    // callback may not fail (it would leave the invalidation unended and the
                    // change undone). The UMR fails when the device is dead or gone; its DMA then
                    // ends at the IOMMU, whose mappings go next, before any frame is reused.
                    odp.zapErrors.incrementAndGet();
                    System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING,
                            () -> this + ": zapping [0x" + Long.toHexString(start) + ", 0x" + Long.toHexString(end) + ") failed, unmapping anyway: " + e.getMessage());
                }
            }
            umem.unmapDmaPages(start, end);
            if (zapped > 0) {
                stats.invalidated(zapped);
                odp.invalidations.incrementAndGet();
            }
            if (parent != null && !dead && umem.mappedPages() == 0) {
                parent.childEmpty(this); // its last page went: the child goes (on the background work)
            }
            return true;
        } finally {
            umem.unlock();
        }
    }

    /**
     * Zaps the present entries of MTT indices [from, to) by UMR, one per run of present pages;
     * when it returns no DMA through them is in flight. The caller holds the umem mutex.
     *
     * @return entries zapped
     */
    private long zap(long from, long to) {
        assert umem.isLockedByCurrentThread();
        long zapped = 0;
        for (long[] run = presentRun(from, to); run != null; run = presentRun(run[1], to)) {
            // zero inside [from, to); the neighbours a rounded UMR block touches keep their entries
            odp.dev.umr().updateXlt(mkey, run[0], run[1] - run[0], k -> k >= from && k < to ? 0 : mttEntry(k));
            zapped += run[1] - run[0];
        }
        return zapped;
    }

    /**
     * The first run of present MTT entries in [from, to) as {start, end}, or null: found through the
     * umem's {@code nextMapped}, so unmapped stretches cost nothing. Caller holds the umem mutex.
     */
    private long[] presentRun(long from, long to) {
        long bound = umem.start() + (to << 12);
        long va = umem.nextMapped(umem.start() + (from << 12), bound);
        if (va < 0) {
            return null;
        }
        long s = Math.max(from, index(va));
        long e = s;
        while (e < to && mttEntry(e) != 0) {
            e++;
        }
        return new long[] { s, e };
    }

    /** {@code MLX5_MKEY_MR}, or {@code MLX5_MKEY_IMPLICIT_CHILD} for a child of an implicit MR. */
    @Override
    public Mlx5Odp.MkeyType type() {
        return parent == null ? Mlx5Odp.MkeyType.MR : Mlx5Odp.MkeyType.IMPLICIT_CHILD;
    }

    @Override
    public Mlx5MkeyUse usecount() {
        return use;
    }

    /** The MR's PD (advise_mr checks it: another PD's MR is EPERM). */
    @Override
    public Mlx5IbPd pd() {
        return pd;
    }

    @Override
    public boolean writable() {
        return umem.writable();
    }

    @Override
    public int mkey() {
        return mkey;
    }

    @Override
    public Stats stats() {
        return stats;
    }

    @Override
    public void deregMr() {
        if (released) {
            return;
        }
        released = true;
        odp.eraseOdpMkey(this); // no new fault finds it; the ones using it are done
        // revoked, not zapped (as mlx5_ib_dereg_mr): a free mkey admits no access, so its entries
        // can keep this MR's (soon unmapped) IOVAs; whoever enables the mkey next writes its whole
        // range first (create_user_odp_mr zaps it, a pinned MR writes every entry it can reach)
        boolean revoked;
        umem.lock();
        try {
            dead = true;
            pd.ctx.dev.umr().revokeMr(mkey);
            revoked = true;
        } catch (KernelException e) {
            revoked = false; // the device is gone or the channel failed
        } finally {
            umem.unlock();
        }
        if (!revoked) {
            destroyMkey(); // the destroy is the revocation: before the umem's IOVAs are unmapped
        }
        umem.release();
        if (revoked && !(cacheKey != null && pd.ctx.dev.mkeyCacheStore(mkey, cacheKey, fromCache))) {
            destroyMkey();
        }
    }

    private void destroyMkey() {
        pd.ctx.dev.destroyQuietly(org.peerdirect.hca.cx4.ifc.Mlx5Cmd.DESTROY_MKEY, org.peerdirect.hca.cx4.ifc.Mkey.mkeyToIdx(mkey));
    }

    /** The restrack counters, as {@code rdma res show mr} prints them. */
    String counters() {
        return stats.toString();
    }





    @Override
    public String toString() {
        return String.format("ODP MR mkey 0x%x [0x%x, +%d) %s", mkey, umem.address(), umem.length(), counters());
    }
}
