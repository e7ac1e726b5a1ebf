package org.peerdirect.ib.core.uverbs;

import java.util.concurrent.atomic.AtomicBoolean;

import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * {@code struct ib_qp}: the driver's QP, with the checks of {@code ib_modify_qp_is_ok} and the IB
 * attribute ranges done here once. The post verbs are one check of a volatile flag and one call
 * into the driver (no lookup, no lock, no allocation).
 */
final class UQp implements IbvQp {

    final UContext ctx;
    /** The QP's PD; null for an XRC receive QP, which has none (it lives in {@link #xrcd}). */
    final UPd pd;
    /** For an XRC receive QP, the real QP this is a handle of (null for other types): destroyed, and its domain released, with its last handle. */
    private final UXrcd.TgtQp shared;
    final IbQpOps ops;
    private final IbvQpType type;
    private final UCq scq;
    private final UCq rcq;
    private final USrq srq;
    private final IbDevice dev;
    private final AtomicBoolean destroyed = new AtomicBoolean();
    /** The port the last successful modify with {@code PORT} chose (1 until then): the port an AV-only modify is checked against. */
    private volatile int port = 1;

    UQp(UContext ctx, UPd pd, IbvQpInitAttr a, IbQpOps ops, UCq scq, UCq rcq, USrq srq, UXrcd.TgtQp shared) {
        this.ctx = ctx;
        this.pd = pd;
        this.shared = shared;
        this.ops = ops;
        this.type = a.qpType;
        this.scq = scq;
        this.rcq = rcq;
        this.srq = srq;
        this.dev = ctx.dev;
    }

    @Override
    public int qpNum() {
        return ops.qpNum();
    }

    @Override
    public IbvQpType qpType() {
        return type;
    }

    @Override
    public IbvQpState state() {
        return ops.state();
    }

    /**
     * {@code ib_modify_qp_is_ok} and the attribute ranges, then the driver. FLUSH access rights on
     * a device without the placement type are EOPNOTSUPP here, as {@code ib_check_mr_access} does
     * for MRs (the kernel leaves QPs to the driver: rxe refuses unknown rights, mlx5 ignores them;
     * a right ignored at modify would surface later as a remote error, so it is refused at once).
     */
    @Override
    public void modify(IbvQpAttr a, int mask) {
        ctx.alive();
        if (destroyed.get()) {
            throw new KernelException(Errno.EINVAL, String.format("QP 0x%x was destroyed", qpNum()));
        }
        int qpn = qpNum();
        IbvQpState cur = ops.state();
        if ((mask & IbvQpAttr.CUR_STATE) != 0 && a.qpState != null && cur != a.qpState && (mask & IbvQpAttr.STATE) == 0) {
            throw new KernelException(Errno.EINVAL, String.format("QP 0x%x: cur_qp_state %s but the QP is in %s", qpn, a.qpState, cur));
        }
        if ((mask & IbvQpAttr.STATE) != 0) {
            IbvQpState next = a.qpState;
            if (next == null || !cur.canMoveTo(next)) {
                throw new KernelException(Errno.EINVAL, String.format("QP 0x%x: cannot move from %s to %s", qpn, cur, next));
            }
            int need = IbvQpState.requiredMask(cur, next, type);
            if ((mask & need) != need) {
                throw new KernelException(Errno.EINVAL, String.format("QP 0x%x: %s -> %s needs attribute mask 0x%x, missing 0x%x", qpn, cur,
                        next, need, need & ~mask));
            }
        }
        if ((mask & IbvQpAttr.PORT) != 0) {
            ctx.checkPort(a.portNum);
        }
        if ((mask & IbvQpAttr.AV) != 0) {
            checkAv(a, (mask & IbvQpAttr.PORT) != 0 ? a.portNum : port);
        }
        if ((mask & IbvQpAttr.ACCESS_FLAGS) != 0) {
            UPd.checkFlushAccess(ctx.dev.attr, a.qpAccessFlags, String.format("ibv_modify_qp(QP 0x%x)", qpn));
        }
        range(mask, IbvQpAttr.PATH_MTU, a.pathMtu, 1, 5, "path_mtu");
        range(mask, IbvQpAttr.RETRY_CNT, a.retryCnt, 0, 7, "retry_cnt");
        range(mask, IbvQpAttr.RNR_RETRY, a.rnrRetry, 0, 7, "rnr_retry");
        range(mask, IbvQpAttr.MIN_RNR_TIMER, a.minRnrTimer, 0, 31, "min_rnr_timer");
        range(mask, IbvQpAttr.TIMEOUT, a.timeout, 0, 31, "timeout");
        range(mask, IbvQpAttr.MAX_QP_RD_ATOMIC, a.maxRdAtomic, 0, ctx.dev.attr.maxQpInitRdAtom(), "max_rd_atomic");
        range(mask, IbvQpAttr.MAX_DEST_RD_ATOMIC, a.maxDestRdAtomic, 0, ctx.dev.attr.maxQpRdAtom(), "max_dest_rd_atomic");
        ops.modifyQp(a, mask);
        if ((mask & IbvQpAttr.PORT) != 0) {
            port = a.portNum;
        }
    }

    /**
     * The address vector against the port's link layer, as {@code rdma_check_ah_attr} and
     * {@code ib_resolve_eth_dmac} do: on an Ethernet (RoCE) port a GRH with the destination GID
     * is the only address there is.
     */
    private void checkAv(IbvQpAttr a, int portNum) {
        checkAddress(dev, portNum, a.isGlobal, a.dgid, a.sgidIndex, a.hopLimit, String.format("QP 0x%x", qpNum()));
    }

    /**
     * {@code rdma_check_ah_attr} for a QP's path and an address handle alike: the GID 16 bytes; an
     * Ethernet (RoCE) port needs the GRH; the source GID index in the port's table; the hop
     * limit 0..255. True when the port is Ethernet (the LID is then not an address).
     */
    static boolean checkAddress(IbDevice dev, int portNum, boolean isGlobal, byte[] dgid, int sgidIndex, int hopLimit, String who) {
        if (dgid == null || dgid.length != 16) {
            throw new KernelException(Errno.EINVAL, who + ": ah_attr.grh.dgid must be 16 bytes");
        }
        IbvPortAttr p = dev.ops.queryPort(portNum);
        boolean roce = p.linkLayer() == IbvPortAttr.LINK_LAYER_ETHERNET;
        if (roce && !isGlobal) {
            throw new KernelException(Errno.EINVAL, String.format("%s: port %d is Ethernet (RoCE): the address vector needs is_global "
                    + "and the destination GID (ah_attr.grh.dgid), a LID means nothing there", who, portNum));
        }
        if (isGlobal && (sgidIndex < 0 || sgidIndex >= p.gidTblLen())) {
            throw new KernelException(Errno.EINVAL, String.format("%s: sgid_index %d is not 0..%d (port %d's GID table)", who, sgidIndex,
                    p.gidTblLen() - 1, portNum));
        }
        if (isGlobal && (hopLimit < 0 || hopLimit > 255)) {
            throw new KernelException(Errno.EINVAL, String.format("%s: hop_limit %d is not 0..255", who, hopLimit));
        }
        return roce;
    }

    private void range(int mask, int bit, int v, int min, int max, String what) {
        if ((mask & bit) != 0 && (v < min || v > max)) {
            throw new KernelException(Errno.EINVAL, String.format("QP 0x%x: %s %d is not %d..%d", qpNum(), what, v, min, max));
        }
    }

    @Override
    public IbvQpAttr query() {
        ctx.alive();
        return ops.queryQp();
    }

    @Override
    public void postSend(IbvSendWr wr) {
        if (dev.removed) {
            throw dev.removedError();
        }
        ops.postSend(wr);
    }

    @Override
    public void postRecv(IbvRecvWr wr) {
        if (dev.removed) {
            throw dev.removedError();
        }
        ops.postRecv(wr);
    }

    /** Disassociation: to ERR if the driver still can (the hardware may be gone). */
    void toErrorQuietly() {
        try {
            IbvQpAttr x = new IbvQpAttr();
            x.qpState = IbvQpState.ERR;
            ops.modifyQp(x, IbvQpAttr.STATE);
        } catch (RuntimeException gone) {
            // the driver tore the hardware down first: its QPs are in error already
        }
    }

    @Override
    public void destroy() {
        if (!destroyed.compareAndSet(false, true)) {
            return;
        }
        boolean last = shared == null || shared.close(this);
        try {
            if (last) {
                ops.destroyQp();
            }
        } finally {
            synchronized (ctx) {
                if (scq != null) {
                    scq.usecnt.decrementAndGet();
                }
                if (rcq != null) {
                    rcq.usecnt.decrementAndGet();
                }
                if (srq != null) {
                    srq.usecnt.decrementAndGet();
                }
                if (pd != null) {
                    pd.qps.remove(this);
                } else {
                    ctx.xrcQps.remove(this);
                }
            }
            if (shared != null && last) {
                shared.domain.release();
            }
        }
    }

    @Override
    public String toString() {
        return ops.toString();
    }
}
