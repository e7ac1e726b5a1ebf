package org.peerdirect.ib.core.uverbs;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.ib.core.verbs.IbvSrqAttr;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/** {@code struct ib_srq}: the driver's SRQ and its use count. */
final class USrq implements IbvSrq {
    final UPd pd;
    final IbSrqOps ops;
    final AtomicInteger usecnt = new AtomicInteger();
    private final AtomicBoolean destroyed = new AtomicBoolean();

    /** An XRC SRQ's domain and CQ (null for a basic SRQ): their use counts are held while it lives. */
    private final UXrcd.Domain xrcd;
    private final UCq cq;

    USrq(UPd pd, IbSrqOps ops, UXrcd.Domain xrcd, UCq cq) {
        this.pd = pd;
        this.ops = ops;
        this.xrcd = xrcd;
        this.cq = cq;
    }

    @Override
    public int srqNum() {
        pd.ctx.alive();
        return ops.srqNum();
    }

    @Override
    public void postRecv(IbvRecvWr wr) {
        if (pd.ctx.dev.removed) {
            throw pd.ctx.dev.removedError();
        }
        ops.postSrqRecv(wr);
    }

    /** {@code ib_uverbs_modify_srq}: the mask's known bits to the driver, which checks the values. */
    @Override
    public void modify(IbvSrqAttr attr, int attrMask) {
        pd.ctx.alive();
        if (destroyed.get()) {
            throw new KernelException(Errno.EINVAL, "ibv_modify_srq: the SRQ was destroyed");
        }
        if (attr == null || (attrMask & ~(IbvSrqAttr.MAX_WR | IbvSrqAttr.LIMIT)) != 0 || attrMask == 0) {
            throw new KernelException(Errno.EINVAL, "ibv_modify_srq: attr_mask 0x" + Integer.toHexString(attrMask)
                    + " is not a set of IBV_SRQ_MAX_WR (1) and IBV_SRQ_LIMIT (2)" + (attr == null ? " (no attributes)" : ""));
        }
        ops.modifySrq(new IbvSrqAttr(attr.maxWr, attr.maxSge, attr.srqLimit), attrMask);
    }

    @Override
    public IbvSrqAttr query() {
        pd.ctx.alive();
        if (destroyed.get()) {
            throw new KernelException(Errno.EINVAL, "ibv_query_srq: the SRQ was destroyed");
        }
        return ops.querySrq();
    }

    boolean destroyed() {
        return destroyed.get();
    }

    @Override
    public void destroy() {
        synchronized (pd.ctx) {
            if (destroyed.get()) {
                return; // idempotent: destroyed before (by the user or the context's close)
            }
            if (usecnt.get() > 0) {
                throw new KernelException(Errno.EBUSY, "ibv_destroy_srq: SRQ is still used by " + usecnt.get() + " QP(s)");
            }
            destroyed.set(true);
        }
        try {
            ops.destroySrq();
        } finally {
            pd.srqs.remove(this);
            if (cq != null) {
                cq.usecnt.decrementAndGet();
            }
            if (xrcd != null) {
                xrcd.release();
            }
        }
    }
}
