package org.peerdirect.mlx5.ib;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.umem.IbUmemDmabuf;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * A dynamic dma-buf MR on mlx5 ({@code mlx5_ib_reg_user_mr_dmabuf} with
 * {@code mlx5_ib_dmabuf_attach_ops}): a free UMR mkey over [iova, iova+length) whose translation
 * is the dma-buf's mapping. Registration maps the whole buffer and enables the mkey by UMR
 * ({@code mlx5_ib_init_dmabuf_mr}). The exporter's {@code move_notify} (reservation lock held)
 * zaps every entry by UMR ({@code MLX5_IB_UPD_XLT_ZAP}); the umem then unmaps. The next access by
 * the device is a page fault, served like an ODP fault: under the reservation lock the buffer is
 * mapped again where it now is and the entries rewritten ({@code pagefault_dmabuf_mr}). A revoked
 * buffer (its exporter's device gone) cannot be mapped again: the fault resumes with an error and
 * the access completes in error.
 *
 * <p>{@code ibv_advise_mr} prefetches it as the kernel does: {@code get_prefetchable_mr} finds it
 * in {@code odp_mkeys}, and {@code pagefault_mr} maps the whole buffer whatever the range (an
 * address below the MR's iova is EFAULT, as for ODP MRs; {@code PREFETCH_NO_FAULT} maps it too:
 * {@code pagefault_dmabuf_mr} has no snapshot mode).
 *
 * <p>Lock rules: the buffer's reservation lock orders faults, zaps and deregistration (the UMRs
 * run under it, never the other way round); the use count pairs faults with the deregistration's
 * wait.
 */
final class Mlx5DmabufMr implements Mlx5MkeyMr, Mlx5Odp.OdpMkey {

    private final Mlx5IbPd pd;
    private final IbUmemDmabuf umem;
    final int mkey;
    private final long iova;
    private final int npages;
    private final int access;
    private final Mlx5Odp odp;
    private final java.util.concurrent.atomic.AtomicBoolean deregistering = new java.util.concurrent.atomic.AtomicBoolean();
    private final Mlx5MkeyUse use = new Mlx5MkeyUse();
    /** Entries hold the mapping now (reservation lock). */
    private boolean translated;
    /** Deregistered: no fault maps it again (reservation lock). */
    private boolean released;
    /** The mkey is destroyed (reservation lock). */
    private boolean destroyed;
    final AtomicLong faults = new AtomicLong();
    final AtomicLong moves = new AtomicLong();
    /** The restrack counters; only prefetches count here (a dma-buf mapping is not paged). */
    private final Mlx5OdpMr.Stats stats = new Mlx5OdpMr.Stats(null);

    private Mlx5DmabufMr(Mlx5IbPd pd, IbUmemDmabuf umem, int mkey, long iova, int npages, int access, Mlx5Odp odp) {
        this.access = access;
        this.pd = pd;
        this.umem = umem;
        this.mkey = mkey;
        this.iova = iova;
        this.npages = npages;
        this.odp = odp;
    }

    /**
     * {@code mlx5_ib_reg_user_mr_dmabuf}: the page-fault EQ (dma-buf MRs re-map through the ODP
     * fault path), the dynamic import with this MR's {@code move_notify}, a free mkey with room for
     * every page, the MR in the fault path's table, then the first mapping with ENABLE.
     */
    static Mlx5DmabufMr create(Mlx5IbPd pd, long offset, long length, long iova, int fd, int access) {
        Mlx5IbDev dev = pd.ctx.dev;
        org.peerdirect.ib.core.verbs.IbvDeviceAttr.OdpCaps caps = dev.queryDevice().odpCaps();
        if ((caps.generalCaps() & org.peerdirect.ib.core.verbs.IbvDeviceAttr.ODP_SUPPORT) == 0) {
            throw new KernelException(Errno.EOPNOTSUPP, dev.name() + ": dma-buf MRs re-map through the ODP page-fault path, which this device lacks");
        }
        if (caps.maxOdpSize() != -1L && Long.compareUnsigned(length, caps.maxOdpSize()) > 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: a dma-buf MR of %d bytes is more than UMR can load (%d)", dev.name(), length,
                    caps.maxOdpSize()));
        }
        Mlx5Odp odp = dev.odp();
        AtomicReference<Mlx5DmabufMr> live = new AtomicReference<>();
        IbUmemDmabuf umem = dev.umems.umemDmabufGet(pd.ctx.process, dev, offset, length, fd, access, u -> {
            Mlx5DmabufMr mr = live.get();
            if (mr != null) {
                mr.moveNotify();
            }
        });
        long pages = ((iova + length + 4095) >>> 12) - (iova >>> 12);
        if (pages > Integer.MAX_VALUE - 1) {
            umem.release();
            throw new KernelException(Errno.EINVAL, String.format("%s: a dma-buf MR of %d pages is more than an mkey's MTT holds", dev.name(), pages));
        }
        int mkey;
        try {
            mkey = Mlx5Mr.regCreate(pd, iova, length, access, (int) pages, 0, null, true);
        } catch (RuntimeException e) {
            umem.release();
            throw e;
        }
        Mlx5DmabufMr mr = new Mlx5DmabufMr(pd, umem, mkey, iova, (int) pages, access, odp);
        live.set(mr);
        odp.storeOdpMkey(mr);
        try {
            mr.pagefault(true);
        } catch (RuntimeException e) {
            mr.deregMr();
            throw e;
        }
        return mr;
    }

    /**
     * MTT entry {@code i}: the DMA address of the page holding byte {@code i * 4096 - pageOffset(iova)}
     * of the range; 0 past the last page (a UMR writes whole octowords: an odd count asks for one more).
     */
    private long mtt(long i) {
        if (i >= npages) {
            return 0;
        }
        long off = Math.max(0, i * 4096 - (iova & 4095));
        return umem.dmaAddressOf(off) & ~4095L | Mkey.MTT_READ | Mkey.MTT_WRITE;
    }

    /**
     * {@code pagefault_dmabuf_mr}: under the reservation lock the whole buffer mapped (if the
     * exporter moved it, where it now is) and every entry written; with {@code enable} the mkey
     * enabled too (registration).
     *
     * @return pages mapped
     * @throws KernelException EINVAL when the import is revoked, ENODEV when the buffer is
     */
    long pagefault(boolean enable) {
        return pagefault(enable, false);
    }

    /** {@link #pagefault(boolean)}; a {@code prefetch} is not counted as a fault. */
    private long pagefault(boolean enable, boolean prefetch) {
        umem.lock();
        try {
            if (released) {
                throw new KernelException(Errno.EINVAL, String.format("dma-buf MR mkey 0x%x is being deregistered", mkey));
            }
            if (destroyed) {
                throw new KernelException(Errno.EIO, String.format("dma-buf MR mkey 0x%x was destroyed (a zap failed)", mkey));
            }
            umem.mapPages();
            if (enable || !translated) {
                // "may be translated" from before the UMR: a partial write is zapped by the next move all the same
                translated = true;
                if (enable) {
                    pd.ctx.dev.umr().updateAndEnable(mkey, mkey & 0xff, pd.pdn, iova, umem.length(), access, npages, this::mtt);
                } else {
                    pd.ctx.dev.umr().updateXlt(mkey, 0, npages, this::mtt);
                    if (!prefetch) {
                        faults.incrementAndGet();
                    }
                }
            }
            return npages;
        } finally {
            umem.unlock();
        }
    }

    /** The exporter moves the buffer (reservation lock held): every entry zapped before the umem unmaps. */
    private void moveNotify() {
        assert umem.isLockedByCurrentThread();
        if (translated && !destroyed) {
            try {
                pd.ctx.dev.umr().updateXlt(mkey, 0, npages, k -> 0);
            } catch (KernelException e) {
                // the UMR failed (timeout, flushed QP, device gone): the destroy is the zap left,
                // before the umem unmaps the IOVAs (later accesses end in error, never in a stale page)
                destroyMkey();
            }
            translated = false;
        }
        moves.incrementAndGet();
    }

    /**
     * The device's fault ({@code pagefault_single_data_segment} → {@code pagefault_dmabuf_mr}):
     * the whole buffer whatever the range, counted as a fault (the prefetch ahead of an RDMA
     * fault too: it is the device's). The caller holds the use count.
     */
    @Override
    public long pagefaultDevice(long va, long len, int flags) {
        return pagefault(false);
    }

    @Override
    public void deregMr() {
        if (!deregistering.compareAndSet(false, true)) {
            return;
        }
        odp.eraseOdpMkey(this);
        umem.lock();
        try {
            released = true;
            if (!destroyed) {
                try {
                    pd.ctx.dev.umr().revokeMr(mkey);
                } catch (KernelException e) {
                    // the destroy below is the revocation left
                }
            }
            destroyMkey(); // under the lock: no move may unmap the IOVAs before the key is gone
        } finally {
            umem.unlock();
        }
        umem.release();
    }

    private void destroyMkey() {
        if (!destroyed) {
            destroyed = true;
            pd.ctx.dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
        }
    }

    @Override
    public int mkey() {
        return mkey;
    }

    /** {@code MLX5_MKEY_MR}: faulted by its own key ({@code pagefault_mr} with {@code is_dmabuf}). */
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
        return (access & org.peerdirect.ib.core.umem.IbAccess.LOCAL_WRITE) != 0;
    }

    @Override
    public Mlx5OdpMr.Stats stats() {
        return stats;
    }

    /**
     * {@code pagefault_mr} for a dma-buf MR (the prefetch path; device faults come through
     * {@link #pagefaultDevice}): EFAULT below the MR's iova unless permissive, then
     * {@code pagefault_dmabuf_mr}, the whole buffer, whatever {@code len}.
     */
    @Override
    public long pagefault(long va, long len, int flags, boolean permissive) {
        if (!permissive && va < iova) {
            throw new KernelException(Errno.EFAULT, String.format("dma-buf MR mkey 0x%x: 0x%x is below its iova 0x%x", mkey, va, iova));
        }
        boolean prefetch = (flags & Mlx5OdpMr.PF_FLAGS_PREFETCH) != 0;
        long pages = pagefault(false, prefetch);
        if (prefetch) {
            stats.prefetched(pages);
            odp.prefetchedPages.addAndGet(pages);
        }
        return pages;
    }

    @Override
    public boolean invalidated() {
        return umem.revoked() || umem.dmabuf().revoked();
    }

    @Override
    public String toString() {
        return String.format("dma-buf MR mkey 0x%x [0x%x, +%d) of %s: faults %d, moves %d, prefetched pages %d%s", mkey, iova, umem.length(),
                umem.dmabuf(), faults.get(), moves.get(), stats.pagePrefetch.get(), invalidated() ? " REVOKED" : "");
    }
}
