package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongUnaryOperator;

import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.ib.core.umem.UmemOdpInvalidate;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx5.core.Mlx5CoreDev;

/**
 * mlx5_ib's memory registration ({@code drivers/infiniband/hw/mlx5/mr.c}): the verbs of a PD that
 * make an MR and the {@code CREATE_MKEY} they share. Each MR kind is its own class, made here or
 * by its own factory: a pinned or peer MR is {@link Mlx5IbMr}, an explicit ODP MR
 * {@link Mlx5OdpMr}, an implicit one {@link Mlx5ImplicitMr} ({@code odp.c}), a dynamic dma-buf MR
 * {@link Mlx5DmabufMr}. The mkey cache is {@link Mlx5MkeyCache}, the UMR channel {@link Mlx5Umr}
 * ({@code umr.c}).
 *
 * @see "drivers/infiniband/hw/mlx5/mr.c: mlx5_ib_reg_user_mr, create_real_mr, create_user_odp_mr,
 *      alloc_cacheable_mr, reg_create, mlx5_ib_reg_user_mr_dmabuf, mlx5_ib_advise_mr"
 */
final class Mlx5Mr {

    private Mlx5Mr() {
    }

    /**
     * {@code get_unchangeable_access_flags}: the rights no UMR mask bit sets on the model, the
     * model-only FLUSH rights (set by CREATE_MKEY only). The cache is keyed by them, as the
     * kernel's: no persistent entry has any, so an MR with one is created by {@code reg_create}
     * and its mkey kept in a temporary entry at dereg, for the next MR with the same rights.
     */
    static final int UMR_UNCHANGEABLE = IbAccess.FLUSH_GLOBAL | IbAccess.FLUSH_PERSISTENT;

    /**
     * The most MTT entries {@link #regCreate} puts in one CREATE_MKEY (512 KiB of translation,
     * half the largest command the firmware takes); a bigger MR is loaded by UMR.
     */
    static final int MAX_CREATE_MTT = 64 * 1024;

    /**
     * {@code mlx5_ib_advise_mr}: the three prefetch advices; anything else EOPNOTSUPP. Before the
     * first ODP MR there is no ODP key, so every lkey is ENOENT. The work is
     * {@code mlx5_ib_advise_mr_prefetch} ({@link Mlx5Odp#adviseMr}).
     */
    static void adviseMr(Mlx5IbPd pd, int advice, int flags, IbvSge[] sgList) {
        if (advice != IbvPd.ADVISE_MR_ADVICE_PREFETCH && advice != IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE
                && advice != IbvPd.ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) {
            throw new KernelException(Errno.EOPNOTSUPP, "ibv_advise_mr: advice " + advice + " is not supported (PREFETCH 0, PREFETCH_WRITE 1, PREFETCH_NO_FAULT 2)");
        }
        Mlx5Odp odp = pd.ctx.dev.odpIfStarted();
        if (odp == null) {
            throw Mlx5Odp.noOdpMr(pd.ctx.dev, sgList[0].lkey);
        }
        odp.adviseMr(pd, advice, flags, sgList);
    }

    /**
     * {@code mlx5_ib_reg_user_mr}: an ODP MR for {@code IB_ACCESS_ON_DEMAND}
     * ({@link #createUserOdpMr}); else the umem (pinned, or peer with invalidation support), the
     * MR ({@link #createRealMr}), then the invalidation notifier, which revokes the mkey before it
     * returns.
     */
    static IbMrOps regUserMr(Mlx5IbPd pd, long addr, long length, int access) {
        return regUserMr(pd, addr, length, addr, access);
    }

    /**
     * {@code mlx5_ib_reg_user_mr} with {@code iova} ({@code virt_addr}) other than {@code addr}:
     * the mkey starts at the iova, its translation is the umem's pages in order (the core checked
     * that both share their page offset). An on-demand MR at another iova is EOPNOTSUPP here: the
     * page-fault path translates device addresses as the process's.
     */
    static IbMrOps regUserMr(Mlx5IbPd pd, long addr, long length, long iova, int access) {
        if ((access & IbAccess.ON_DEMAND) != 0) {
            if (iova != addr) {
                throw new KernelException(Errno.EOPNOTSUPP, String.format("%s: an on-demand MR at iova 0x%x for address 0x%x is not "
                        + "supported (the ODP page-fault path maps device addresses as the process's)", pd.ctx.dev.name(), iova, addr));
            }
            return createUserOdpMr(pd, addr, length, access);
        }
        Mlx5IbDev dev = pd.ctx.dev;
        IbUmem umem = dev.umems.umemGet(pd.ctx.process, dev, addr, length, access,
                UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP);
        Mlx5IbMr mr;
        try {
            mr = createRealMr(pd, umem, addr, length, iova, access);
        } catch (RuntimeException e) {
            umem.stopInvalidationNotifier();
            umem.release();
            throw e;
        }
        try {
            umem.activateInvalidationNotifier(u -> mr.revokeOnInvalidate());
        } catch (RuntimeException e) {
            mr.deregMr();
            throw e;
        }
        return mr;
    }

    /**
     * {@code create_real_mr}: for a pinned umem an mkey from the cache ({@code alloc_cacheable_mr}),
     * enabled by UMR with one MTT entry per 4 KiB page ({@code MLX5_IB_MTT_PRESENT}); for a peer
     * umem, or more pages than any cache entry holds, an mkey by {@code CREATE_MKEY}
     * ({@code reg_create}, UMR-enabled so it can be revoked). The mkey starts at {@code iova} (the
     * address but for {@code ibv_reg_mr_iova}). The caller releases the umem on failure.
     */
    private static Mlx5IbMr createRealMr(Mlx5IbPd pd, IbUmem umem, long addr, long length, long iova, int access) {
        Mlx5IbDev dev = pd.ctx.dev;
        long first = addr & ~4095L;
        int npages = (int) ((addr + length - first + 4095) >>> 12);
        LongUnaryOperator mtt = i -> umem.dmaAddressOf(Math.max(addr, first + 4096L * i)) & ~4095L | Mkey.MTT_READ | Mkey.MTT_WRITE;
        // peer MRs never come from the cache; rights UMR cannot set are part of the key (alloc_cacheable_mr)
        boolean cacheable = !umem.isPeer();
        int unchangeable = access & UMR_UNCHANGEABLE;
        if ((access & IbAccess.FLUSH_PERSISTENT) != 0) {
            checkPersistent(dev, umem, addr, length, npages);
        }
        Mlx5MkeyCache.Taken t = cacheable ? dev.mkeyCache().alloc(unchangeable, npages) : null;
        if (t != null) {
            try {
                dev.umr().updateAndEnable(t.mkey(), t.mkey() & 0xff, pd.pdn, iova, length, access, npages, mtt);
            } catch (RuntimeException e) {
                dev.mkeyCache().abandon(t); // its state is unknown: destroyed, not cached
                throw e;
            }
            return new Mlx5IbMr(pd, umem, t.mkey(), t.key(), true);
        }
        int octwords = (npages + 1) / 2;
        int mkey;
        if (npages <= MAX_CREATE_MTT) {
            mkey = regCreate(pd, iova, length, access, npages, npages, mtt, false);
        } else {
            // more translation than one CREATE_MKEY carries (a 1 GiB peer MR has 262 144
            // entries): created empty (free), then loaded and enabled by UMR in chunks
            mkey = regCreate(pd, iova, length, access, npages, 0, null, true);
            try {
                dev.umr().updateAndEnable(mkey, mkey & 0xff, pd.pdn, iova, length, access, npages, mtt);
            } catch (RuntimeException e) {
                dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
                throw e;
            }
        }
        return new Mlx5IbMr(pd, umem, mkey, cacheable ? Mlx5MkeyCache.key(unchangeable, 2 * octwords) : null, false);
    }

    /**
     * {@code mlx5_ib_reg_user_mr_dmabuf}: the dynamic flavour, re-mapped through the page-fault
     * path after the exporter moves the buffer ({@link Mlx5DmabufMr}).
     */
    static IbMrOps regUserMrDmabuf(Mlx5IbPd pd, long offset, long length, long iova, int fd, int access) {
        return Mlx5DmabufMr.create(pd, offset, length, iova, fd, access);
    }

    /**
     * {@code create_user_odp_mr}: the page-fault EQ exists (made with the first ODP MR); an ODP umem
     * whose invalidations go to the MR ({@code mlx5_mn_ops}); an mkey from the cache, or
     * {@code reg_create} with {@code free} and no translation, enabled empty by UMR; the MR in
     * {@code odp_mkeys}; then the snapshot of the pages resident now ({@code mlx5_ib_init_odp_mr}).
     * Everything the device reaches of it after that comes through page faults. Address 0 with
     * length SIZE_MAX is the implicit MR ({@link Mlx5ImplicitMr}).
     */
    private static IbMrOps createUserOdpMr(Mlx5IbPd pd, long addr, long length, int access) {
        Mlx5IbDev dev = pd.ctx.dev;
        if (addr == 0 && length == -1L) {
            return createImplicitMr(pd, access);
        }
        checkOdpMr(dev, length, access);
        Mlx5Odp odp = dev.odp();
        AtomicReference<Mlx5OdpMr> live = new AtomicReference<>();
        IbUmemOdp umem = dev.umems.umemOdpGet(pd.ctx.process, dev, addr, length, access, (u, range, seq) -> {
            Mlx5OdpMr mr = live.get();
            // before the MR exists the device has no translation of it: unmapping is all there is
            return mr == null ? UmemOdpInvalidate.UNMAP_ONLY.invalidate(u, range, seq) : mr.invalidate(u, range, seq);
        });
        long pages = (umem.end() - umem.start()) >>> 12;
        if (pages > Integer.MAX_VALUE - 1) {
            umem.release();
            throw new KernelException(Errno.EINVAL, String.format("%s: an ODP MR of %d pages is more than an mkey's MTT holds", dev.name(), pages));
        }
        int npages = (int) pages;
        int unchangeable = access & UMR_UNCHANGEABLE; // as for pinned MRs: part of the cache key
        Mlx5MkeyCache.Taken t;
        int mkey;
        try {
            t = dev.mkeyCache().alloc(unchangeable, npages);
            mkey = t != null ? t.mkey() : regCreate(pd, addr, length, access, npages, 0, null, true);
        } catch (RuntimeException e) {
            umem.release();
            throw e;
        }
        try {
            if (t != null) {
                // a cached mkey keeps the translations of the MR that had it: every entry the new
                // range reaches is zapped before it is enabled, or the device would use them
                // instead of faulting (mlx5_ib_init_odp_mr writes the whole range, not-present included)
                dev.umr().updateXlt(mkey, 0, npages, k -> 0);
            }
            dev.umr().updateAndEnable(mkey, mkey & 0xff, pd.pdn, addr, length, access, 0, null);
        } catch (RuntimeException e) {
            if (t != null) {
                dev.mkeyCache().abandon(t); // its state is unknown: destroyed, not cached
            } else {
                dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
            }
            umem.release();
            throw e;
        }
        Mlx5OdpMr mr = new Mlx5OdpMr(pd, umem, mkey, t != null ? t.key() : Mlx5MkeyCache.key(unchangeable, 2 * ((npages + 1) / 2)), t != null, odp);
        live.set(mr);
        odp.storeOdpMkey(mr);
        try {
            mr.snapshot();
        } catch (RuntimeException e) {
            mr.deregMr();
            throw e;
        }
        return mr;
    }

    /** {@code create_user_odp_mr}'s implicit case: refused unless the device reports {@code IB_ODP_SUPPORT_IMPLICIT}. */
    private static IbMrOps createImplicitMr(Mlx5IbPd pd, int access) {
        Mlx5IbDev dev = pd.ctx.dev;
        // (the kernel also wants iova 0: an implicit MR's iova is its address, 0; another iova is refused before this)
        if ((dev.queryDevice().odpCaps().generalCaps() & IbvDeviceAttr.ODP_SUPPORT_IMPLICIT) == 0) {
            throw new KernelException(Errno.EINVAL, dev.name() + ": implicit ODP (address 0, length SIZE_MAX) needs IB_ODP_SUPPORT_IMPLICIT,"
                    + " which this device does not report");
        }
        return Mlx5ImplicitMr.create(pd, access);
    }

    /** {@code create_user_odp_mr}'s checks of an explicit ODP MR: no longer than UMR loads, never persistent. */
    private static void checkOdpMr(Mlx5IbDev dev, long length, int access) {
        IbvDeviceAttr.OdpCaps caps = dev.queryDevice().odpCaps();
        if (caps.maxOdpSize() != -1L && Long.compareUnsigned(length, caps.maxOdpSize()) > 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: an ODP MR of %d bytes is more than UMR can load (%d)", dev.name(), length,
                    caps.maxOdpSize()));
        }
        if ((access & IbAccess.FLUSH_PERSISTENT) != 0) {
            throw new KernelException(Errno.EINVAL, dev.name() + ": IB_ACCESS_FLUSH_PERSISTENT on an ODP MR: on-demand pages are host RAM,"
                    + " never persistent memory (rxe's rule for pages that are not pmem)");
        }
    }

    /**
     * IB_ACCESS_FLUSH_PERSISTENT promises persistence, so every page must be persistent memory, as
     * rxe's {@code rxe_mr_fill_pages_from_sgt} checks {@code is_pmem_page}: here the device's
     * IOMMU is asked whether each DMA address maps a persistent BAR (an SSD's PMR through
     * {@code ssd_mem}); host frames never are. EINVAL naming the first page that is not.
     */
    private static void checkPersistent(Mlx5IbDev dev, IbUmem umem, long addr, long length, int npages) {
        long first = addr & ~4095L;
        for (int i = 0; i < npages; i++) {
            long va = Math.max(addr, first + 4096L * i);
            if (!dev.dma().persistent(umem.dmaAddressOf(va) & ~4095L, 4096)) {
                throw new KernelException(Errno.EINVAL, String.format("%s: IB_ACCESS_FLUSH_PERSISTENT over 0x%x+0x%x: page 0x%x is not persistent"
                        + " memory (host RAM or a non-persistent BAR; register a persistent region, e.g. --mem ssd_mem)", dev.name(), addr,
                        length, va & ~4095L));
            }
        }
    }

    /**
     * {@code reg_create}: a UMR-enabled MTT mkey of {@code pd} by {@code CREATE_MKEY} with room for
     * {@code capacity} entries, the first {@code given} from {@code mttEntry}; {@code free} creates it
     * disabled (an ODP MR, enabled by UMR).
     */
    static int regCreate(Mlx5IbPd pd, long addr, long length, int access, int capacity, int given, LongUnaryOperator mttEntry, boolean free) {
        return createMkey(pd, Mkey.ACCESS_MODE_MTT, 12, addr, length, access, (capacity + 1) / 2, given, mttEntry, free);
    }

    /**
     * {@code CREATE_MKEY} of an indirect (KSM) mkey with {@code umr_en} and {@code free}: room for
     * {@code entries} KSM entries of {@code 2^blockShift} bytes, none written (implicit ODP's
     * parent, enabled later by {@link Mlx5Umr#enableKsm}).
     */
    static int regCreateKsm(Mlx5IbPd pd, int access, int entries, int blockShift) {
        return createMkey(pd, Mkey.ACCESS_MODE_KSM, blockShift, 0, 0, access, entries, 0, null, true);
    }

    /** {@code CREATE_MKEY} with {@code umr_en}: {@code octwords} of translations, the first {@code given} MTT entries from {@code mttEntry}. */
    private static int createMkey(Mlx5IbPd pd, int mode, int logPageSize, long addr, long length, int access, int octwords, int given,
            LongUnaryOperator mttEntry, boolean free) {
        Mlx5IbDev dev = pd.ctx.dev;
        int givenOct = (given + 1) / 2;
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_MKEY, 0, (int) Mkey.CREATE_IN_MTT + 16 * givenOct);
        long m = Mkey.CREATE_IN_MKC;
        Mkey.MKC_ACCESS_MODE_1_0.set(in, m, mode & 3);
        Mkey.MKC_ACCESS_MODE_4_2.set(in, m, mode >>> 2);
        Mkey.MKC_UMR_EN.set(in, m, 1);
        Mkey.MKC_FREE.set(in, m, free ? 1 : 0);
        Mkey.MKC_LR.set(in, m, 1);
        Mkey.MKC_LW.set(in, m, (access & IbAccess.LOCAL_WRITE) != 0 ? 1 : 0);
        Mkey.MKC_RR.set(in, m, (access & IbAccess.REMOTE_READ) != 0 ? 1 : 0);
        Mkey.MKC_RW.set(in, m, (access & IbAccess.REMOTE_WRITE) != 0 ? 1 : 0);
        Mkey.MKC_A.set(in, m, (access & IbAccess.REMOTE_ATOMIC) != 0 ? 1 : 0);
        Mkey.MKC_FLUSH_GLOBAL.set(in, m, (access & IbAccess.FLUSH_GLOBAL) != 0 ? 1 : 0);
        Mkey.MKC_FLUSH_PERSISTENT.set(in, m, (access & IbAccess.FLUSH_PERSISTENT) != 0 ? 1 : 0);
        Mkey.MKC_QPN.set(in, m, 0xff_ffff);
        int keyByte = dev.mkeyKey.incrementAndGet() & 0xff;
        Mkey.MKC_MKEY_7_0.set(in, m, keyByte);
        Mkey.MKC_PD.set(in, m, pd.pdn);
        in.set(BE64, m + Mkey.MKC_START_ADDR, addr);
        in.set(BE64, m + Mkey.MKC_LEN, length);
        Mkey.MKC_TRANSLATIONS_OCTWORD_SIZE.set(in, m, octwords);
        Mkey.MKC_LOG_PAGE_SIZE.set(in, m, logPageSize);
        in.set(BE32, Mkey.CREATE_IN_OCTWORD_ACTUAL_SIZE, givenOct);
        for (int i = 0; i < given; i++) {
            in.set(BE64, Mkey.CREATE_IN_MTT + 8L * i, mttEntry.applyAsLong(i));
        }
        return Mkey.idxToMkey(dev.execIndex(in, 16)) | keyByte;
    }
}
