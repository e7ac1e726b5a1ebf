package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.ib.core.provider.IbAhOps;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.provider.IbPdOps;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.ib.core.umem.UmemOdpInvalidate;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.ib.core.verbs.IbvSrqAttr;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.lib.Mlx5Cq;
import org.peerdirect.mlx5.lib.Mlx5Srq;
import org.peerdirect.mlx5.lib.Mlx5Qp;

/** {@code struct mlx5_ib_pd}: a PD number and the objects created in it. */
final class Mlx5IbPd implements IbPdOps {

    final Mlx5IbUcontext ctx;
    final int pdn;

    Mlx5IbPd(Mlx5IbUcontext ctx, int pdn) {
        this.ctx = ctx;
        this.pdn = pdn;
    }

    /**
     * {@code mlx5_ib_advise_mr}: the three prefetch advices; anything else EOPNOTSUPP. Before the
     * first ODP MR there is no ODP key, so every lkey is ENOENT.
     */
    @Override
    public void adviseMr(int advice, int flags, IbvSge[] sgList) {
        if (advice != IbvPd.ADVISE_MR_ADVICE_PREFETCH && advice != IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE
                && advice != IbvPd.ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) {
            throw new KernelException(Errno.EOPNOTSUPP, "ibv_advise_mr: advice " + advice + " is not supported (PREFETCH 0, PREFETCH_WRITE 1, PREFETCH_NO_FAULT 2)");
        }
        Mlx5Odp odp = ctx.dev.odpIfStarted();
        if (odp == null) {
            throw Mlx5Odp.noOdpMr(ctx.dev, sgList[0].lkey);
        }
        odp.adviseMr(this, advice, flags, sgList);
    }

    /**
     * {@code mlx5_ib_reg_user_mr} → {@code create_real_mr}: the umem (pinned, or peer with
     * invalidation support); for a pinned umem an mkey from the cache ({@code alloc_cacheable_mr}),
     * enabled by UMR with one MTT entry per 4 KiB page ({@code MLX5_IB_MTT_PRESENT}); for a peer
     * umem, or more pages than any cache entry holds, an mkey by {@code CREATE_MKEY}
     * ({@code reg_create}, UMR-enabled so it can be revoked); then the invalidation notifier, which
     * revokes the mkey before it returns.
     */
    @Override
    public IbMrOps regUserMr(long addr, long length, int access) {
        if ((access & IbAccess.ON_DEMAND) != 0) {
            return createUserOdpMr(addr, length, access);
        }
        Mlx5IbDev dev = ctx.dev;
        IbUmem umem = dev.umems.umemGet(ctx.process, dev, addr, length, access,
                UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP);
        long first = addr & ~4095L;
        int npages = (int) ((addr + length - first + 4095) >>> 12);
        java.util.function.LongUnaryOperator mtt = i -> umem.dmaAddressOf(Math.max(addr, first + 4096L * i)) & ~4095L | Mkey.MTT_READ | Mkey.MTT_WRITE;
        Mlx5IbMr mr;
        // peer MRs never come from the cache; rights UMR cannot set are part of the key (alloc_cacheable_mr)
        boolean cacheable = !umem.isPeer();
        int unchangeable = access & UMR_UNCHANGEABLE;
        try {
            if ((access & IbAccess.FLUSH_PERSISTENT) != 0) {
                checkPersistent(umem, addr, length, npages);
            }
            Mlx5MkeyCache.Taken t = cacheable ? dev.mkeyCache().alloc(unchangeable, npages) : null;
            if (t != null) {
                try {
                    dev.umr().updateAndEnable(t.mkey(), t.mkey() & 0xff, pdn, addr, length, access, npages, mtt);
                } catch (RuntimeException e) {
                    dev.mkeyCache().abandon(t); // its state is unknown: destroyed, not cached
                    throw e;
                }
                mr = new Mlx5IbMr(this, umem, t.mkey(), t.key(), true);
            } else {
                int octwords = (npages + 1) / 2;
                int mkey;
                if (npages <= MAX_CREATE_MTT) {
                    mkey = regCreate(addr, length, access, npages, npages, mtt, false);
                } else {
                    // more translation than one CREATE_MKEY carries (a 1 GiB peer MR has 262 144
                    // entries): created empty (free), then loaded and enabled by UMR in chunks
                    mkey = regCreate(addr, length, access, npages, 0, null, true);
                    try {
                        dev.umr().updateAndEnable(mkey, mkey & 0xff, pdn, addr, length, access, npages, mtt);
                    } catch (RuntimeException e) {
                        dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
                        throw e;
                    }
                }
                mr = new Mlx5IbMr(this, umem, mkey, cacheable ? Mlx5MkeyCache.key(unchangeable, 2 * octwords) : null, false);
            }
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
     * {@code mlx5_ib_reg_user_mr_dmabuf}: the dynamic flavour, re-mapped through the page-fault
     * path after the exporter moves the buffer ({@link Mlx5DmabufMr}).
     */
    @Override
    public IbMrOps regUserMrDmabuf(long offset, long length, long iova, int fd, int access) {
        return Mlx5DmabufMr.create(this, offset, length, iova, fd, access);
    }

    @Override
    public boolean hasRegUserMrDmabuf() {
        return true;
    }

    /**
     * {@code create_user_odp_mr}: the page-fault EQ exists (made with the first ODP MR); an ODP umem
     * whose invalidations go to the MR ({@code mlx5_mn_ops}); an mkey from the cache, or
     * {@code reg_create} with {@code free} and no translation, enabled empty by UMR; the MR in
     * {@code odp_mkeys}; then the snapshot of the pages resident now ({@code mlx5_ib_init_odp_mr}).
     * Everything the device reaches of it after that comes through page faults.
     */
    private IbMrOps createUserOdpMr(long addr, long length, int access) {
        Mlx5IbDev dev = ctx.dev;
        org.peerdirect.ib.core.verbs.IbvDeviceAttr.OdpCaps caps = dev.queryDevice().odpCaps();
        if (addr == 0 && length == -1L) {
            // (the kernel also wants iova 0; this SPI's regUserMr has no iova: the MR's iova is its address)
            if ((caps.generalCaps() & org.peerdirect.ib.core.verbs.IbvDeviceAttr.ODP_SUPPORT_IMPLICIT) == 0) {
                throw new KernelException(Errno.EINVAL, dev.name() + ": implicit ODP (address 0, length SIZE_MAX) needs IB_ODP_SUPPORT_IMPLICIT,"
                        + " which this device does not report");
            }
            return Mlx5ImplicitMr.create(this, access);
        }
        if (caps.maxOdpSize() != -1L && Long.compareUnsigned(length, caps.maxOdpSize()) > 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: an ODP MR of %d bytes is more than UMR can load (%d)", dev.name(), length,
                    caps.maxOdpSize()));
        }
        if ((access & IbAccess.FLUSH_PERSISTENT) != 0) {
            throw new KernelException(Errno.EINVAL, dev.name() + ": IB_ACCESS_FLUSH_PERSISTENT on an ODP MR: on-demand pages are host RAM,"
                    + " never persistent memory (rxe's rule for pages that are not pmem)");
        }
        Mlx5Odp odp = dev.odp();
        java.util.concurrent.atomic.AtomicReference<Mlx5OdpMr> live = new java.util.concurrent.atomic.AtomicReference<>();
        IbUmemOdp umem = dev.umems.umemOdpGet(ctx.process, dev, addr, length, access, (u, range, seq) -> {
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
            mkey = t != null ? t.mkey() : regCreate(addr, length, access, npages, 0, null, true);
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
            dev.umr().updateAndEnable(mkey, mkey & 0xff, pdn, addr, length, access, 0, null);
        } catch (RuntimeException e) {
            if (t != null) {
                dev.mkeyCache().abandon(t); // its state is unknown: destroyed, not cached
            } else {
                dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
            }
            umem.release();
            throw e;
        }
        Mlx5OdpMr mr = new Mlx5OdpMr(this, umem, mkey, t != null ? t.key() : Mlx5MkeyCache.key(unchangeable, 2 * ((npages + 1) / 2)), t != null, odp);
        live.set(mr);
        odp.mkeys.put(Mkey.mkeyToIdx(mkey), mr);
        try {
            mr.snapshot();
        } catch (RuntimeException e) {
            mr.deregMr();
            throw e;
        }
        return mr;
    }

    /**
     * {@code get_unchangeable_access_flags}: the rights no UMR mask bit sets on the model, the
     * model-only FLUSH rights (set by CREATE_MKEY only). The cache is keyed by them, as the
     * kernel's: no persistent entry has any, so an MR with one is created by {@code reg_create}
     * and its mkey kept in a temporary entry at dereg, for the next MR with the same rights.
     */
    static final int UMR_UNCHANGEABLE = IbAccess.FLUSH_GLOBAL | IbAccess.FLUSH_PERSISTENT;

    /**
     * IB_ACCESS_FLUSH_PERSISTENT promises persistence, so every page must be persistent memory, as
     * rxe's {@code rxe_mr_fill_pages_from_sgt} checks {@code is_pmem_page}: here the device's
     * IOMMU is asked whether each DMA address maps a persistent BAR (an SSD's PMR through
     * {@code ssd_mem}); host frames never are. EINVAL naming the first page that is not.
     */
    private void checkPersistent(IbUmem umem, long addr, long length, int npages) {
        long first = addr & ~4095L;
        for (int i = 0; i < npages; i++) {
            long va = Math.max(addr, first + 4096L * i);
            if (!ctx.dev.dma().persistent(umem.dmaAddressOf(va) & ~4095L, 4096)) {
                throw new KernelException(Errno.EINVAL, String.format("%s: IB_ACCESS_FLUSH_PERSISTENT over 0x%x+0x%x: page 0x%x is not persistent"
                        + " memory (host RAM or a non-persistent BAR; register a persistent region, e.g. --mem ssd_mem)", ctx.dev.name(), addr,
                        length, va & ~4095L));
            }
        }
    }

    /**
     * The most MTT entries {@link #regCreate} puts in one CREATE_MKEY (512 KiB of translation,
     * half the largest command the firmware takes); a bigger MR is loaded by UMR.
     */
    static final int MAX_CREATE_MTT = 64 * 1024;

    /**
     * {@code reg_create}: a UMR-enabled MTT mkey by {@code CREATE_MKEY} with room for
     * {@code capacity} entries, the first {@code given} from {@code mttEntry}; {@code free} creates it
     * disabled (an ODP MR, enabled by UMR).
     */
    int regCreate(long addr, long length, int access, int capacity, int given, java.util.function.LongUnaryOperator mttEntry, boolean free) {
        return createMkey(Mkey.ACCESS_MODE_MTT, 12, addr, length, access, (capacity + 1) / 2, given, mttEntry, free);
    }

    /**
     * {@code CREATE_MKEY} of an indirect (KSM) mkey with {@code umr_en} and {@code free}: room for
     * {@code entries} KSM entries of {@code 2^blockShift} bytes, none written (implicit ODP's
     * parent, enabled later by {@link Mlx5Umr#enableKsm}).
     */
    int regCreateKsm(int access, int entries, int blockShift) {
        return createMkey(Mkey.ACCESS_MODE_KSM, blockShift, 0, 0, access, entries, 0, null, true);
    }

    /** {@code CREATE_MKEY} with {@code umr_en}: {@code octwords} of translations, the first {@code given} MTT entries from {@code mttEntry}. */
    private int createMkey(int mode, int logPageSize, long addr, long length, int access, int octwords, int given,
            java.util.function.LongUnaryOperator mttEntry, boolean free) {
        Mlx5IbDev dev = ctx.dev;
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
        Mkey.MKC_PD.set(in, m, pdn);
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

    /**
     * {@code mlx5_ib_create_qp} with libmlx5's {@code mlx5_create_qp}: the library's buffer (RQ,
     * then SQ, then the doorbell record) in the process's memory, pinned; {@code CREATE_QP} with
     * the QPC and the page list; the library's QP over the buffer.
     */
    @Override
    public IbQpOps createQp(IbvQpInitAttr a, IbCqOps sendCq, IbCqOps recvCq, IbSrqOps srq, IbEvents events) {
        Mlx5IbDev dev = ctx.dev;
        if (a.qpType != IbvQpType.RC && a.qpType != IbvQpType.UD && a.qpType != IbvQpType.XRC_SEND) {
            throw new KernelException(Errno.EOPNOTSUPP, dev.name() + ": QP type " + a.qpType + " is not built on mlx5 (RC, UD, XRC_SEND are)");
        }
        boolean xrc = a.qpType == IbvQpType.XRC_SEND;
        int maxInline = a.maxInlineData;
        // a QP on an SRQ has no receive queue of its own (rq_type SRQ, log_rq_size 0); an XRC send QP none at all
        int[] g = Mlx5Qp.geometry(a.qpType, a.maxSendWr, a.maxSendSge, maxInline, srq != null || xrc ? 0 : a.maxRecvWr, a.maxRecvSge);
        int logSq = g[0];
        int logRq = g[1];
        int rqStride = 16 << g[2];
        long rqBytes = logRq < 0 ? 0 : (long) rqStride << logRq;
        Mlx5IbUcontext.Pinned p = ctx.pin(rqBytes + ((long) Qp.SEND_WQE_BB << logSq));
        int npages = (int) (p.buf().queueBytes / 4096);
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_QP, 0, (int) Qp.CREATE_QP_IN_PAS + 8 * npages);
        long c = Qp.IN_QPC;
        Qp.QPC_ST.set(in, c, a.qpType == IbvQpType.UD ? Qp.ST_UD : xrc ? Qp.ST_XRC : Qp.ST_RC);
        Qp.QPC_PM_STATE.set(in, c, Qp.PM_MIGRATED);
        Qp.QPC_PD.set(in, c, pdn);
        Qp.QPC_LOG_MSG_MAX.set(in, c, 30);
        Qp.QPC_RQ_TYPE.set(in, c, srq != null || xrc ? Srq.RQ_SRQ : logRq < 0 ? Qp.RQ_ZERO_LEN : Qp.RQ_REGULAR);
        if (xrc) {
            // create_user_qp for XRC_INI: the driver's initiator domain (devr->xrcdn1); its receive CQ and SRQ
            // (devr->c0, devr->s0) are never used: the send CQ stands for c0, and no SRQ is named
            Qp.QPC_XRCD.set(in, c, dev.xrcdForInitiators());
        }
        if (srq != null) {
            Srq.QPC_SRQN.set(in, c, ((Mlx5Srq) srq).srqn);
        }
        Qp.QPC_LOG_RQ_SIZE.set(in, c, Math.max(0, logRq));
        Qp.QPC_LOG_RQ_STRIDE.set(in, c, g[2]);
        Qp.QPC_LOG_SQ_SIZE.set(in, c, logSq);
        Qp.QPC_UAR_PAGE.set(in, c, ctx.uar.index);
        Qp.QPC_CQN_SND.set(in, c, ((Mlx5Cq) sendCq).cqn);
        Qp.QPC_CQN_RCV.set(in, c, ((Mlx5Cq) (xrc ? sendCq : recvCq)).cqn);
        Qp.QPC_PRI_VHCA_PORT_NUM.set(in, c, 1);
        in.set(BE64, c + Qp.QPC_DBR_ADDR, p.pa(npages));
        for (int i = 0; i < npages; i++) {
            in.set(BE64, Qp.CREATE_QP_IN_PAS + 8L * i, p.pa(i));
        }
        int qpn;
        try {
            qpn = dev.execIndex(in, 16);
        } catch (RuntimeException e) {
            p.release();
            throw e;
        }
        int bfSize = 1 << Math.max(0, dev.core.cap(org.peerdirect.hca.cx4.ifc.HcaCap.LOG_BF_REG_SIZE) - 1);
        Mlx5Qp qp = new Mlx5Qp(qpn, a.qpType, p.buf(), ctx.uar, bfSize, logSq, logRq, rqStride, a.maxSendSge, a.maxRecvSge, maxInline,
                (Mlx5Cq) sendCq, xrc ? null : (Mlx5Cq) recvCq, (Mlx5Srq) srq, new Mlx5Qp.Control() {
                    @Override
                    public void modify(Mlx5Qp q, IbvQpAttr cur, IbvQpAttr attr, int mask, IbvQpState from, IbvQpState to) {
                        modifyQp(dev, q.qpn, cur, attr, mask, from, to);
                    }

                    @Override
                    public IbvQpState queryState(Mlx5Qp q) {
                        return Mlx5IbPd.queryState(dev, q.qpn);
                    }

                    @Override
                    public void destroy(Mlx5Qp q) {
                        dev.core.unregisterQp(q.qpn);
                        if (dev.qpTable[q.qpn] == q) {
                            dev.qpTable[q.qpn] = null;
                        }
                        dev.qpBufs.remove(q.qpn);
                        dev.destroyQuietly(Mlx5Cmd.DESTROY_QP, q.qpn);
                        p.release();
                    }
                });
        dev.core.registerQp(qpn, type -> {
            IbvEventType t = qpEvent(type);
            if (t != null) {
                events.event(t);
            }
        });
        dev.qpTable[qpn] = qp;
        dev.qpBufs.put(qpn, new Mlx5IbDev.QpBuf(p, rqBytes, 1 << logSq, logRq < 0 ? 0 : 1 << logRq, logRq < 0 ? 0 : rqStride, a.qpType == IbvQpType.UD));
        return qp;
    }

    /** {@code mlx5_ib_qp_event}: the EQE type's IB event, or null for one it does not map. */
    static IbvEventType qpEvent(int type) {
        return switch (type) {
            case Eq.EVENT_PATH_MIG -> IbvEventType.PATH_MIG;
            case Eq.EVENT_COMM_EST -> IbvEventType.COMM_EST;
            case Eq.EVENT_SQ_DRAINED -> IbvEventType.SQ_DRAINED;
            case Eq.EVENT_SRQ_LAST_WQE -> IbvEventType.QP_LAST_WQE_REACHED;
            case Eq.EVENT_WQ_CATAS_ERROR -> IbvEventType.QP_FATAL;
            case Eq.EVENT_PATH_MIG_FAILED -> IbvEventType.PATH_MIG_ERR;
            case Eq.EVENT_WQ_INVAL_REQ_ERROR -> IbvEventType.QP_REQ_ERR;
            case Eq.EVENT_WQ_ACCESS_ERROR -> IbvEventType.QP_ACCESS_ERR;
            default -> null;
        };
    }

    /** {@code mlx5_ib_query_qp}'s state: {@code QUERY_QP}'s {@code qpc.state}. */
    static IbvQpState queryState(Mlx5IbDev dev, int qpn) {
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.QUERY_QP, 0, 16);
        org.peerdirect.hca.cx4.ifc.Pages.INDEX24.set(in, 0, qpn);
        MemorySegment out = dev.cmd(() -> dev.core.exec(in, Qp.QUERY_OUT_LEN));
        return switch (Qp.QPC_STATE.get(out, Qp.QUERY_OUT_QPC)) {
            case Qp.STATE_RST -> IbvQpState.RESET;
            case Qp.STATE_INIT -> IbvQpState.INIT;
            case Qp.STATE_RTR -> IbvQpState.RTR;
            case Qp.STATE_RTS -> IbvQpState.RTS;
            case Qp.STATE_SQER -> IbvQpState.SQE;
            case Qp.STATE_SQD -> IbvQpState.SQD;
            default -> IbvQpState.ERR;
        };
    }

    /** {@code mlx5_ib_modify_qp}: the transition's command with the QPC the attributes give. */
    static void modifyQp(Mlx5IbDev dev, int qpn, IbvQpAttr cur, IbvQpAttr a, int mask, IbvQpState from, IbvQpState to) {
        int opcode;
        if (to == IbvQpState.ERR) {
            opcode = Qp.QP_2ERR;
        } else if (to == IbvQpState.RESET) {
            opcode = Qp.QP_2RST;
        } else {
            opcode = switch (from.name() + ">" + to.name()) {
                case "RESET>INIT" -> Qp.RST2INIT_QP;
                case "INIT>INIT" -> Qp.INIT2INIT_QP;
                case "INIT>RTR" -> Qp.INIT2RTR_QP;
                case "RTR>RTS" -> Qp.RTR2RTS_QP;
                case "RTS>RTS" -> Qp.RTS2RTS_QP;
                case "SQE>RTS" -> Qp.SQERR2RTS_QP;
                default -> throw new KernelException(Errno.EINVAL, String.format("%s: QP 0x%x: no transition from %s to %s on mlx5",
                        dev.name(), qpn, from, to));
            };
        }
        boolean full = opcode != Qp.QP_2ERR && opcode != Qp.QP_2RST;
        MemorySegment in = Mlx5CoreDev.input(opcode, 0, full ? Qp.MODIFY_IN_LEN : 16);
        org.peerdirect.hca.cx4.ifc.Pages.INDEX24.set(in, 0, qpn);
        if (full) {
            long c = Qp.IN_QPC;
            int port = (mask & IbvQpAttr.PORT) != 0 ? a.portNum : cur.portNum;
            int access = (mask & IbvQpAttr.ACCESS_FLAGS) != 0 ? a.qpAccessFlags : cur.qpAccessFlags;
            Qp.QPC_PRI_VHCA_PORT_NUM.set(in, c, port);
            Qp.QPC_PRI_PKEY_INDEX.set(in, c, (mask & IbvQpAttr.PKEY_INDEX) != 0 ? a.pkeyIndex : cur.pkeyIndex);
            Qp.QPC_Q_KEY.set(in, c, (mask & IbvQpAttr.QKEY) != 0 ? a.qkey : cur.qkey);
            Qp.QPC_RRE.set(in, c, (access & IbAccess.REMOTE_READ) != 0 ? 1 : 0);
            Qp.QPC_RWE.set(in, c, (access & IbAccess.REMOTE_WRITE) != 0 ? 1 : 0);
            Qp.QPC_RAE.set(in, c, (access & IbAccess.REMOTE_ATOMIC) != 0 ? 1 : 0);
            Qp.QPC_FLUSH_GLOBAL.set(in, c, (access & IbAccess.FLUSH_GLOBAL) != 0 ? 1 : 0);
            Qp.QPC_FLUSH_PERSISTENT.set(in, c, (access & IbAccess.FLUSH_PERSISTENT) != 0 ? 1 : 0);
            Qp.QPC_MTU.set(in, c, (mask & IbvQpAttr.PATH_MTU) != 0 ? a.pathMtu : cur.pathMtu);
            Qp.QPC_REMOTE_QPN.set(in, c, (mask & IbvQpAttr.DEST_QPN) != 0 ? a.destQpNum : cur.destQpNum);
            IbvQpAttr av = (mask & IbvQpAttr.AV) != 0 ? a : cur;
            Qp.QPC_PRI_RLID.set(in, c, av.dlid);
            if (av.isGlobal) { // mlx5_set_path: the GRH, the source GID index, the hop limit and the remote GID
                Qp.QPC_PRI_GRH.set(in, c, 1);
                Qp.QPC_PRI_SRC_ADDR_INDEX.set(in, c, av.sgidIndex);
                Qp.QPC_PRI_HOP_LIMIT.set(in, c, av.hopLimit);
                MemorySegment.copy(av.dgid, 0, in, ValueLayout.JAVA_BYTE, c + Qp.QPC_PRI_RGID, 16);
            }
            Qp.QPC_NEXT_RCV_PSN.set(in, c, (mask & IbvQpAttr.RQ_PSN) != 0 ? a.rqPsn : cur.rqPsn);
            Qp.QPC_NEXT_SEND_PSN.set(in, c, (mask & IbvQpAttr.SQ_PSN) != 0 ? a.sqPsn : cur.sqPsn);
            Qp.QPC_MIN_RNR_NAK.set(in, c, (mask & IbvQpAttr.MIN_RNR_TIMER) != 0 ? a.minRnrTimer : cur.minRnrTimer);
            Qp.QPC_LOG_RRA_MAX.set(in, c, log2((mask & IbvQpAttr.MAX_DEST_RD_ATOMIC) != 0 ? a.maxDestRdAtomic : cur.maxDestRdAtomic));
            Qp.QPC_LOG_SRA_MAX.set(in, c, log2((mask & IbvQpAttr.MAX_QP_RD_ATOMIC) != 0 ? a.maxRdAtomic : cur.maxRdAtomic));
            Qp.QPC_RETRY_COUNT.set(in, c, (mask & IbvQpAttr.RETRY_CNT) != 0 ? a.retryCnt : cur.retryCnt);
            Qp.QPC_RNR_RETRY.set(in, c, (mask & IbvQpAttr.RNR_RETRY) != 0 ? a.rnrRetry : cur.rnrRetry);
            Qp.QPC_PRI_ACK_TIMEOUT.set(in, c, (mask & IbvQpAttr.TIMEOUT) != 0 ? a.timeout : cur.timeout);
        }
        dev.cmd(() -> dev.core.exec(in, 16));
    }

    private static int log2(int n) {
        return 31 - Integer.numberOfLeadingZeros(Math.max(1, n));
    }

    /**
     * {@code mlx5_ib_create_srq} with libmlx5's {@code mlx5_create_srq}: the WQE list (max_wr + 1
     * WQEs, a power of two) and its doorbell record in the process's memory, pinned;
     * {@code CREATE_SRQ} with the SRQ context and the page list.
     */
    @Override
    public IbSrqOps createSrq(int maxWr, int maxSge, IbEvents events) {
        return createSrq(null, null, maxWr, maxSge, events);
    }

    /**
     * {@code mlx5_ib_create_srq} of an {@code IB_SRQT_XRC} SRQ: the same WQE list, created by
     * {@code CREATE_XRC_SRQ} with the domain and the CQ ({@code create_xrc_srq_cmd}); armed,
     * queried and destroyed by the {@code _XRC_SRQ} commands.
     */
    @Override
    public IbSrqOps createXrcSrq(org.peerdirect.ib.core.provider.IbXrcdOps xrcd, IbCqOps cq, int maxWr, int maxSge, IbEvents events) {
        return createSrq((Mlx5Xrcd) xrcd, (Mlx5Cq) cq, maxWr, maxSge, events);
    }

    private IbSrqOps createSrq(Mlx5Xrcd xrcd, Mlx5Cq xcq, int maxWr, int maxSge, IbEvents events) {
        Mlx5IbDev dev = ctx.dev;
        boolean xrc = xrcd != null;
        int[] g = Mlx5Srq.geometry(maxWr, maxSge);
        int wqes = g[0];
        int stride = g[1];
        Mlx5IbUcontext.Pinned p = ctx.pin((long) wqes * stride);
        Mlx5Srq.initList(p.buf(), wqes, stride);
        int npages = (int) (p.buf().queueBytes / 4096);
        MemorySegment in = Mlx5CoreDev.input(xrc ? Mlx5Cmd.CREATE_XRC_SRQ : Mlx5Cmd.CREATE_SRQ, 0, (int) Srq.CREATE_SRQ_IN_PAS + 8 * npages);
        long c = Srq.CREATE_SRQ_IN_SRQC;
        if (xrc) {
            Srq.SRQC_XRCD.set(in, c, xrcd.xrcdn);
            Srq.SRQC_CQN.set(in, c, xcq.cqn);
        }
        Srq.SRQC_LOG_SRQ_SIZE.set(in, c, Integer.numberOfTrailingZeros(wqes));
        Srq.SRQC_LOG_RQ_STRIDE.set(in, c, Integer.numberOfTrailingZeros(stride) - 4);
        Srq.SRQC_PD.set(in, c, pdn);
        in.set(BE64, c + Srq.SRQC_DBR_ADDR, p.pa(npages));
        for (int i = 0; i < npages; i++) {
            in.set(BE64, Srq.CREATE_SRQ_IN_PAS + 8L * i, p.pa(i));
        }
        int srqn;
        try {
            srqn = dev.execIndex(in, 16);
        } catch (RuntimeException e) {
            p.release();
            throw e;
        }
        dev.srqBufs.put(srqn, new Mlx5IbDev.SrqBuf(p, wqes, stride));
        dev.core.registerSrq(srqn, type -> {
            // mlx5_ib_srq_event
            if (type == Eq.EVENT_SRQ_RQ_LIMIT) {
                events.event(IbvEventType.SRQ_LIMIT_REACHED);
            } else if (type == Eq.EVENT_SRQ_CATAS_ERROR) {
                events.event(IbvEventType.SRQ_ERR);
            }
        });
        int sges = Math.min(maxSge, (stride - Srq.NEXT_SEG_SIZE) / Qp.DS_SIZE);
        Mlx5Srq srq = new Mlx5Srq(srqn, p.buf(), wqes, stride, new Mlx5Srq.Control() {
            /**
             * {@code mlx5_ib_modify_srq}: no resize; a limit below the WQE count ({@code msrq.max}),
             * armed by {@code ARM_RQ}.
             */
            @Override
            public void modify(IbvSrqAttr a, int mask) {
                if ((mask & IbvSrqAttr.MAX_WR) != 0) {
                    throw new KernelException(Errno.EINVAL, dev.name() + ": ibv_modify_srq: resize SRQ is not supported");
                }
                if ((mask & IbvSrqAttr.LIMIT) != 0) {
                    if (a.srqLimit < 0 || a.srqLimit >= wqes) {
                        throw new KernelException(Errno.EINVAL, String.format("%s: ibv_modify_srq: srq_limit %d is not below the SRQ's %d WQEs",
                                dev.name(), a.srqLimit & 0xffff_ffffL, wqes));
                    }
                    MemorySegment in = Mlx5CoreDev.input(xrc ? Mlx5Cmd.ARM_XRC_SRQ : Mlx5Cmd.ARM_RQ, Srq.ARM_RQ_OP_MOD_SRQ, 16);
                    org.peerdirect.hca.cx4.ifc.Pages.INDEX24.set(in, 0, srqn);
                    in.set(BE16, Srq.ARM_RQ_IN_LWM, (short) a.srqLimit);
                    dev.cmd(() -> dev.core.exec(in, 16));
                }
            }

            /** {@code mlx5_ib_query_srq}: the limit from {@code QUERY_SRQ}'s lwm, max_wr one below the WQE count. */
            @Override
            public IbvSrqAttr query() {
                MemorySegment in = Mlx5CoreDev.input(xrc ? Mlx5Cmd.QUERY_XRC_SRQ : Mlx5Cmd.QUERY_SRQ, 0, 16);
                org.peerdirect.hca.cx4.ifc.Pages.INDEX24.set(in, 0, srqn);
                MemorySegment out = dev.cmd(() -> dev.core.exec(in, Srq.QUERY_SRQ_OUT_LEN));
                return new IbvSrqAttr(wqes - 1, sges, Srq.SRQC_LWM.get(out, Srq.QUERY_SRQ_OUT_SRQC));
            }

            @Override
            public void destroy() {
                dev.core.unregisterSrq(srqn);
                dev.srqBufs.remove(srqn);
                dev.srqTable[srqn] = null;
                dev.destroyQuietly(xrc ? Mlx5Cmd.DESTROY_XRC_SRQ : Mlx5Cmd.DESTROY_SRQ, srqn);
                p.release();
            }
        });
        dev.srqTable[srqn] = srq;
        return srq;
    }

    @Override
    public IbAhOps createAh(org.peerdirect.ib.core.verbs.IbvAhAttr a) {
        return IbAhOps.addressVector(a);
    }

    @Override
    public void deallocPd() {
        ctx.dev.destroyQuietly(Mlx5Cmd.DEALLOC_PD, pdn);
    }
}
