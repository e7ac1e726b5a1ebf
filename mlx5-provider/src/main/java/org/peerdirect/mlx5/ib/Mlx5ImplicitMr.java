package org.peerdirect.mlx5.ib;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;

import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * An implicit ODP MR ({@code mlx5_ib_alloc_implicit_mr}): one key for the whole address space of
 * the process. The parent is an indirect (KSM) mkey whose entries each cover 1 GiB
 * ({@code MLX5_IMR_MTT_SIZE}) and point at a child, an ordinary ODP MR over that gigabyte, or at
 * the null mkey; a device access through an entry without a child faults on the parent's key.
 * Nothing exists below the parent until the first fault (or prefetch) in a gigabyte creates its
 * child ({@code implicit_get_child_mr}); when an invalidation leaves a child with no page mapped,
 * the child leaves {@link #children}, its KSM entry is rewritten and it is deregistered on the
 * background work ({@code destroy_unused_implicit_child_mr}, {@code free_implicit_child_mr_work}).
 *
 * <p>Lock rules: {@link #children} is the kernel's {@code implicit_children} xarray (its own
 * atomicity is the {@code xa_lock}); KSM entries are written under the parent umem's mutex, each
 * time from what {@link #children} says then ({@code populate_klm}), so the last writer writes the
 * current state. A fault that meets a child not yet in the KSM, or one being removed, is resumed
 * and faults again, as the kernel's comment in {@code pagefault_implicit_mr} explains. The use
 * count ({@link Mlx5MkeyUse}) is held by faults and prefetches on the parent and by every pending
 * child destruction: deregistration waits for them, then deregisters the children left.
 *
 * @see "drivers/infiniband/hw/mlx5/odp.c: mlx5_ib_alloc_implicit_mr, pagefault_implicit_mr"
 */
final class Mlx5ImplicitMr implements Mlx5MkeyMr, Mlx5Odp.OdpMkey {

    /** {@code MLX5_IMR_MTT_SHIFT}: each child (and each KSM entry) covers 1 GiB. */
    static final int IMR_MTT_SHIFT = 30;
    static final long IMR_MTT_SIZE = 1L << IMR_MTT_SHIFT;
    /** {@code MLX5_IMR_MTT_ENTRIES}: a child's 4 KiB MTT entries. */
    static final int IMR_MTT_ENTRIES = 1 << (IMR_MTT_SHIFT - 12);
    /**
     * {@code mlx5_imr_ksm_entries = BIT(get_order(TASK_SIZE) - MLX5_IMR_MTT_BITS)}: the process
     * address space is 2^47 bytes (x86-64's {@code TASK_SIZE}), so 2^17 entries of 1 GiB.
     */
    static final int KSM_ENTRIES = 1 << (47 - IMR_MTT_SHIFT);

    private final Mlx5IbPd pd;
    final IbUmemOdp umem;
    final int mkey;
    private final int access;
    private final Mlx5Odp odp;
    private final Mlx5MkeyUse use = new Mlx5MkeyUse();
    /** {@code implicit_children}: 1 GiB index → its child. */
    final ConcurrentHashMap<Long, Mlx5OdpMr> children = new ConcurrentHashMap<>();
    private volatile boolean released;
    /** Children created and destroyed over the MR's life (what the tests and {@code odp_stats} show). */
    final java.util.concurrent.atomic.AtomicLong childrenCreated = new java.util.concurrent.atomic.AtomicLong();
    final java.util.concurrent.atomic.AtomicLong childrenDestroyed = new java.util.concurrent.atomic.AtomicLong();
    /** The restrack counters, summed over the children (a child adds to them as it counts its own). */
    final Mlx5OdpMr.Stats stats = new Mlx5OdpMr.Stats(null);

    private Mlx5ImplicitMr(Mlx5IbPd pd, IbUmemOdp umem, int mkey, int access, Mlx5Odp odp) {
        this.pd = pd;
        this.umem = umem;
        this.mkey = mkey;
        this.access = access;
        this.odp = odp;
    }

    /**
     * {@code mlx5_ib_alloc_implicit_mr}: the implicit umem, a KSM mkey of {@link #KSM_ENTRIES}
     * entries created free, enabled over the whole address space by UMR with every entry on the
     * null mkey (a freshly created mkey has no entry pointing anywhere, so no entry is written:
     * the kernel's parent comes from the mkey cache and needs its entries zapped to the null mkey
     * first), then the key in {@code odp_mkeys}.
     */
    static Mlx5ImplicitMr create(Mlx5IbPd pd, int access) {
        Mlx5IbDev dev = pd.ctx.dev;
        Mlx5Odp odp = dev.odp();
        IbUmemOdp umem = dev.umems.umemOdpAllocImplicit(pd.ctx.process, dev, access);
        int mkey;
        try {
            mkey = Mlx5Mr.regCreateKsm(pd, access, KSM_ENTRIES, IMR_MTT_SHIFT);
        } catch (RuntimeException e) {
            umem.release();
            throw e;
        }
        try {
            dev.umr().enableKsm(mkey, pd.pdn, access, IMR_MTT_SHIFT);
        } catch (RuntimeException e) {
            dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
            umem.release();
            throw e;
        }
        Mlx5ImplicitMr mr = new Mlx5ImplicitMr(pd, umem, mkey, access, odp);
        odp.storeOdpMkey(mr);
        return mr;
    }

    /**
     * {@code pagefault_implicit_mr}: faults every child the range crosses, creating the missing
     * ones, then (if any was created) rewrites their KSM entries under the parent umem's mutex.
     *
     * @return pages mapped
     * @throws KernelException EFAULT beyond the {@link #KSM_ENTRIES} gigabytes, or what the
     *         child's fault throws (a page that cannot be mapped)
     */
    @Override
    public long pagefault(long va, long len, int flags, boolean permissive) {
        long top = (long) KSM_ENTRIES * IMR_MTT_SIZE;
        if (va < 0 || va >= top || top - va < len) {
            throw new KernelException(Errno.EFAULT, String.format("implicit mkey 0x%x: [0x%x, +%d) is beyond the %d GiB its KSM covers", mkey, va,
                    len, KSM_ENTRIES));
        }
        long updStart = -1;
        long updEnd = -1;
        long mapped = 0;
        boolean[] created = new boolean[1];
        try {
            while (len > 0) {
                long idx = va >>> IMR_MTT_SHIFT;
                created[0] = false;
                Mlx5OdpMr child = childMr(idx, created);
                if (created[0]) {
                    updStart = updStart < 0 ? idx : Math.min(updStart, idx);
                    updEnd = Math.max(updEnd, idx + 1);
                }
                long n = Math.min(len, (idx + 1) * IMR_MTT_SIZE - va);
                try {
                    mapped += child.pagefault(va, n, flags, permissive);
                } finally {
                    child.put();
                }
                va += n;
                len -= n;
            }
        } finally {
            if (updStart >= 0) {
                updateKsm(updStart, updEnd - updStart);
            }
        }
        return mapped;
    }

    /**
     * {@code implicit_get_child_mr}: the child of gigabyte {@code idx}, held by its use count;
     * creates it if the map has none (or only one being destroyed): an ODP child umem, a fresh MTT
     * mkey of {@link #IMR_MTT_ENTRIES} enabled empty by UMR, inserted with compare-and-set: the loser
     * of a race deregisters its own and uses the winner's. {@code created[0]} says whether this
     * call added it (its KSM entry is then the caller's to write).
     */
    private Mlx5OdpMr childMr(long idx, boolean[] created) {
        for (int attempt = 0;; attempt++) {
            Mlx5OdpMr found = children.get(idx);
            if (found != null) {
                if (found.get()) {
                    return found;
                }
                // being destroyed: it leaves the map before its use count closes, so this ends
                children.remove(idx, found);
                continue;
            }
            Mlx5OdpMr child = createChild(idx);
            Mlx5OdpMr raced = children.putIfAbsent(idx, child);
            if (raced == null) {
                childrenCreated.incrementAndGet();
                created[0] = true;
                return child;
            }
            child.put();
            child.deregMr();
            if (attempt > 1000) {
                throw new KernelException(Errno.EAGAIN, String.format("implicit mkey 0x%x: the child of GiB %d kept changing", mkey, idx));
            }
        }
    }

    /** A new child over gigabyte {@code idx}, its use count held. */
    private Mlx5OdpMr createChild(long idx) {
        Mlx5IbDev dev = pd.ctx.dev;
        java.util.concurrent.atomic.AtomicReference<Mlx5OdpMr> live = new java.util.concurrent.atomic.AtomicReference<>();
        IbUmemOdp cu = umem.allocChild(idx << IMR_MTT_SHIFT, IMR_MTT_SIZE, (u, range, seq) -> {
            Mlx5OdpMr c = live.get();
            return c == null ? org.peerdirect.ib.core.umem.UmemOdpInvalidate.UNMAP_ONLY.invalidate(u, range, seq) : c.invalidate(u, range, seq);
        });
        int cm;
        try {
            // a fresh mkey: its MTT has no stale entry, so it is enabled without zapping 2^18 entries
            cm = Mlx5Mr.regCreate(pd, idx << IMR_MTT_SHIFT, IMR_MTT_SIZE, access, IMR_MTT_ENTRIES, 0, null, true);
        } catch (RuntimeException e) {
            cu.release();
            throw e;
        }
        try {
            dev.umr().updateAndEnable(cm, cm & 0xff, pd.pdn, idx << IMR_MTT_SHIFT, IMR_MTT_SIZE, access, 0, null);
        } catch (RuntimeException e) {
            dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(cm));
            cu.release();
            throw e;
        }
        Mlx5OdpMr child = new Mlx5OdpMr(pd, cu, cm, null, false, odp, this);
        child.get();
        live.set(child);
        return child;
    }

    /** KSM entries [first, first+n) rewritten from {@link #children} ({@code populate_klm}), under the parent umem's mutex. */
    private void updateKsm(long first, long n) {
        int nullMkey = odp.nullMkey();
        umem.lock();
        try {
            pd.ctx.dev.umr().updateKsm(mkey, first, n, i -> {
                Mlx5OdpMr c = children.get(i);
                return c == null ? nullMkey : c.mkey;
            }, IMR_MTT_SHIFT);
        } finally {
            umem.unlock();
        }
    }

    /**
     * {@code destroy_unused_implicit_child_mr}: an invalidation left {@code child} with no page
     * mapped (called under the child umem's mutex). It leaves {@link #children} now; its KSM entry
     * is rewritten and it is deregistered on the background work, which holds the parent's use
     * count (a parent deregistration waits for it). Nothing happens once the parent is being
     * deregistered (it deregisters its children itself) or when the child was already replaced.
     */
    void childEmpty(Mlx5OdpMr child) {
        if (!use.get()) {
            return;
        }
        long idx = child.umem.start() >>> IMR_MTT_SHIFT;
        if (!children.remove(idx, child)) {
            use.put();
            return;
        }
        try {
            odp.background(() -> {
                try {
                    // first the entry (what the map says now: the null mkey, or a newer child), so no
                    // access reaches the child's mkey once it is revoked; an access between the
                    // removal and this finds every page of the child zapped and faults
                    updateKsm(idx, 1);
                    child.deregMr(); // waits for faults still using it, revokes its mkey, releases its umem
                    childrenDestroyed.incrementAndGet();
                } catch (RuntimeException e) {
                    odp.prefetchErrors.incrementAndGet();
                } finally {
                    use.put();
                }
            });
        } catch (RejectedExecutionException e) {
            use.put(); // the device is going away: the parent's deregistration deregisters what is left
            children.putIfAbsent(idx, child);
        }
    }

    /** {@code MLX5_MKEY_MR}: the parent faults by its own key ({@code pagefault_mr} with {@code is_implicit_odp}). */
    @Override
    public Mlx5Odp.MkeyType type() {
        return Mlx5Odp.MkeyType.MR;
    }

    @Override
    public Mlx5MkeyUse usecount() {
        return use;
    }

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
    public Mlx5OdpMr.Stats stats() {
        return stats;
    }

    /**
     * {@code mlx5_ib_dereg_mr} of an implicit MR: the key leaves {@code odp_mkeys}; the use count
     * drains (faults, prefetches and pending child destructions); the parent mkey is revoked (no
     * access through it starts); every child left is deregistered ({@code mlx5_ib_free_odp_mr});
     * the parent mkey destroyed and the implicit umem released. Idempotent.
     */
    @Override
    public void deregMr() {
        if (released) {
            return;
        }
        released = true;
        odp.eraseOdpMkey(this);
        Mlx5IbDev dev = pd.ctx.dev;
        umem.lock();
        try {
            dev.umr().revokeMr(mkey);
        } catch (KernelException e) {
            // the device is gone or the channel failed: the destroy below is the revocation
        } finally {
            umem.unlock();
        }
        dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
        for (Long idx : children.keySet()) {
            Mlx5OdpMr c = children.remove(idx);
            if (c != null) {
                c.deregMr();
            }
        }
        umem.release();
    }





    @Override
    public String toString() {
        return String.format("implicit ODP MR mkey 0x%x children %d (created %d, destroyed %d) %s", mkey, children.size(), childrenCreated.get(),
                childrenDestroyed.get(), stats);
    }
}
