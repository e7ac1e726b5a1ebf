package org.peerdirect.ib.core.uverbs;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.provider.IbPdOps;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvAh;
import org.peerdirect.ib.core.verbs.IbvAhAttr;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvMrInitAttr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * {@code struct ib_pd} and the objects created in it; the checks the core does once for every
 * driver before it asks the driver.
 */
final class UPd implements IbvPd {

    final UContext ctx;
    final IbPdOps ops;
    /** A set, not a copy-on-write list: a PD may hold tens of thousands of MRs, registered and deregistered one by one. */
    final java.util.Set<UMr> mrs = java.util.concurrent.ConcurrentHashMap.newKeySet();
    final List<UQp> qps = new CopyOnWriteArrayList<>();
    final List<USrq> srqs = new CopyOnWriteArrayList<>();
    final List<UAh> ahs = new CopyOnWriteArrayList<>();
    private volatile boolean deallocated;

    UPd(UContext ctx, IbPdOps ops) {
        this.ctx = ctx;
        this.ops = ops;
    }

    private void alive() {
        ctx.alive();
        if (deallocated) {
            throw new KernelException(Errno.EINVAL, ctx.dev.name() + ": the PD was deallocated");
        }
    }

    @Override
    public IbvContext context() {
        return ctx;
    }

    /**
     * {@code ib_uverbs_reg_mr}: {@code ib_check_mr_access} (known flags; remote write or atomic
     * needs local write; on-demand only on a device with ODP; FLUSH rights only on a device with
     * the placement type), then the driver.
     */
    @Override
    public IbvMr regMr(long addr, long length, int access) {
        return regUserMr(addr, length, addr, access);
    }

    /** {@link #regMr} with the MR seen through its keys at {@code iova} (the same as {@code addr} but for {@code ibv_reg_mr_iova}). */
    private IbvMr regUserMr(long addr, long length, long iova, int access) {
        alive();
        if ((access & ~IbAccess.SUPPORTED) != 0) {
            throw new KernelException(Errno.EINVAL, "ibv_reg_mr: unknown access flags 0x" + Integer.toHexString(access & ~IbAccess.SUPPORTED));
        }
        if ((access & (IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC)) != 0 && (access & IbAccess.LOCAL_WRITE) == 0) {
            throw new KernelException(Errno.EINVAL, "ibv_reg_mr: REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE (ib_check_mr_access)");
        }
        if ((access & IbAccess.ON_DEMAND) != 0 && (ctx.dev.attr.odpCaps().generalCaps() & IbvDeviceAttr.ODP_SUPPORT) == 0) {
            throw new KernelException(Errno.EOPNOTSUPP, "ibv_reg_mr: Operation not supported: " + ctx.dev.name()
                    + " has no on-demand paging (IB_ACCESS_ON_DEMAND; odp_caps.general_caps lacks IBV_ODP_SUPPORT)");
        }
        checkFlushAccess(ctx.dev.attr, access, "ibv_reg_mr");
        // the implicit ODP form (address 0, length SIZE_MAX, on demand) goes to the driver, which decides (ibv_reg_mr(3))
        boolean implicit = addr == 0 && length == -1L && (access & IbAccess.ON_DEMAND) != 0;
        if (!implicit && (length <= 0 || Long.compareUnsigned(length, ctx.dev.attr.maxMrSize()) > 0)) {
            throw new KernelException(Errno.EINVAL, "ibv_reg_mr: length " + length + " is not 1.." + Long.toUnsignedString(ctx.dev.attr.maxMrSize()));
        }
        if (iova != addr && Long.compareUnsigned(iova + length, iova) < 0) {
            throw new KernelException(Errno.EINVAL, String.format("ibv_reg_mr_iova: iova 0x%x + length %d overflows", iova, length));
        }
        IbMrOps driverMr = iova == addr ? ops.regUserMr(addr, length, access) : ops.regUserMr(addr, length, iova, access);
        UMr mr = new UMr(this, driverMr, addr, length, access, false);
        mrs.add(mr);
        if (ctx.dev.removed) {
            mr.release(); // removed while registering: the disassociation did not see this MR
        }
        return mr;
    }

    /**
     * {@code ib_check_mr_access}'s last rule, shared by MRs and (as this stack adds, where the
     * kernel leaves it to the driver) QP access flags: a FLUSH right the device does not carry is
     * EOPNOTSUPP.
     */
    static void checkFlushAccess(IbvDeviceAttr d, int access, String verb) {
        long caps = d.deviceCapFlagsEx();
        boolean noGlobal = (access & IbAccess.FLUSH_GLOBAL) != 0 && (caps & IbvDeviceAttr.DEVICE_FLUSH_GLOBAL) == 0;
        if (noGlobal || (access & IbAccess.FLUSH_PERSISTENT) != 0 && (caps & IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT) == 0) {
            throw new KernelException(Errno.EOPNOTSUPP, verb + ": Operation not supported: the device has no RDMA FLUSH with the "
                    + (noGlobal ? "global" : "persistent") + " placement type (IB_ACCESS_FLUSH_*; device_cap_flags_ex lacks IB_DEVICE_FLUSH_*)");
        }
    }

    /** {@code ibv_reg_dmabuf_mr}'s access flags (the man page). */
    static final int DMABUF_ACCESS = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_ATOMIC
            | IbAccess.RELAXED_ORDERING;

    /**
     * {@code UVERBS_METHOD_REG_DMABUF_MR}: EOPNOTSUPP for a driver without the op, before any
     * argument is looked at; then the access flags the man page allows and
     * {@code ib_check_mr_access}, the same page offset for {@code offset} and {@code iova}, a
     * range that is not empty and does not overflow; then the driver (EOPNOTSUPP without
     * {@code reg_user_mr_dmabuf}). The MR's address is {@code iova}.
     */
    @Override
    public IbvMr regDmabufMr(long offset, long length, long iova, int fd, int access) {
        alive();
        if (!ops.hasRegUserMrDmabuf()) { // the op pointer first, before any argument
            throw new KernelException(Errno.EOPNOTSUPP, "ibv_reg_dmabuf_mr: Operation not supported: " + ctx.dev.name()
                    + "'s driver has no reg_user_mr_dmabuf");
        }
        if ((access & ~DMABUF_ACCESS) != 0) {
            throw new KernelException(Errno.EINVAL, "ibv_reg_dmabuf_mr: access flags 0x" + Integer.toHexString(access & ~DMABUF_ACCESS)
                    + " are not allowed (local write, remote write, remote read, remote atomic, relaxed ordering are)");
        }
        if ((access & (IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC)) != 0 && (access & IbAccess.LOCAL_WRITE) == 0) {
            throw new KernelException(Errno.EINVAL, "ibv_reg_dmabuf_mr: REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE (ib_check_mr_access)");
        }
        if ((offset & 4095) != (iova & 4095)) {
            throw new KernelException(Errno.EINVAL, String.format("ibv_reg_dmabuf_mr: offset 0x%x and iova 0x%x have different page offsets", offset, iova));
        }
        if (length <= 0 || offset < 0 || offset + length < offset || iova + length < iova
                || Long.compareUnsigned(length, ctx.dev.attr.maxMrSize()) > 0) {
            throw new KernelException(Errno.EINVAL, String.format("ibv_reg_dmabuf_mr: offset %d length %d iova 0x%x: empty, too long or overflowing",
                    offset, length, iova));
        }
        UMr mr = new UMr(this, ops.regUserMrDmabuf(offset, length, iova, fd, access), iova, length, access, true);
        mrs.add(mr);
        if (ctx.dev.removed) {
            mr.release();
        }
        return mr;
    }

    /** The {@code comp_mask} bits {@link #regMrEx} knows. */
    private static final long MR_INIT_ATTR_KNOWN = IbvMrInitAttr.REG_MR_MASK_IOVA | IbvMrInitAttr.REG_MR_MASK_ADDR
            | IbvMrInitAttr.REG_MR_MASK_FD | IbvMrInitAttr.REG_MR_MASK_FD_OFFSET | IbvMrInitAttr.REG_MR_MASK_DMAH;

    /**
     * {@code ibv_reg_mr_ex}: libibverbs' {@code ibv_cmd_reg_mr_ex} (which fields go together; a
     * dma-buf needs its iova; implicit ODP needs address 0), then {@code UVERBS_METHOD_REG_MR}
     * (an fd needs the driver's {@code reg_user_mr_dmabuf}, else EOPNOTSUPP; the address and the
     * iova share their page offset), then the registration of {@link #regMr} (through the
     * driver's {@code reg_user_mr} with the iova when it is not the address) or
     * {@link #regDmabufMr}, with their own checks (access flags, lengths, ODP support).
     *
     * @see "ibv_cmd_reg_mr_ex() in libibverbs/cmd_mr.c, UVERBS_HANDLER(UVERBS_METHOD_REG_MR) in uverbs_std_types_mr.c"
     */
    @Override
    public IbvMr regMrEx(IbvMrInitAttr a) {
        alive();
        String verb = "ibv_reg_mr_ex";
        if (a == null) {
            throw new KernelException(Errno.EINVAL, verb + ": no mr_init_attr");
        }
        long m = a.compMask;
        if ((m & ~MR_INIT_ATTR_KNOWN) != 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: unknown comp_mask bits 0x%x (IOVA 0x1, ADDR 0x2, FD 0x4, FD_OFFSET 0x8, "
                    + "DMAH 0x10 are known)", verb, m & ~MR_INIT_ATTR_KNOWN));
        }
        if ((m & IbvMrInitAttr.REG_MR_MASK_DMAH) != 0) {
            throw new KernelException(Errno.EOPNOTSUPP, verb + ": Operation not supported: IBV_REG_MR_MASK_DMAH names a DMA handle, "
                    + "and this stack has none (no ibv_alloc_dmah)");
        }
        boolean hasIova = (m & IbvMrInitAttr.REG_MR_MASK_IOVA) != 0;
        boolean hasAddr = (m & IbvMrInitAttr.REG_MR_MASK_ADDR) != 0;
        boolean hasOffset = (m & IbvMrInitAttr.REG_MR_MASK_FD_OFFSET) != 0;
        if ((m & IbvMrInitAttr.REG_MR_MASK_FD) != 0) {
            if (!hasOffset || hasAddr || !hasIova) {
                throw new KernelException(Errno.EINVAL, verb + ": a dma-buf (IBV_REG_MR_MASK_FD) needs FD_OFFSET and IOVA and cannot come "
                        + "with ADDR (comp_mask 0x" + Long.toHexString(m) + ")");
            }
            return regDmabufMr(a.fdOffset, a.length, a.iova, a.fd, a.access);
        }
        if (!hasAddr || hasOffset) {
            throw new KernelException(Errno.EINVAL, verb + ": " + (hasAddr ? "FD_OFFSET without FD" : "neither ADDR nor FD")
                    + " (comp_mask 0x" + Long.toHexString(m) + "): one of an address and a dma-buf is required");
        }
        boolean implicitLength = a.length == -1L && (a.access & IbAccess.ON_DEMAND) != 0;
        if (implicitLength && a.addr != 0) {
            throw new KernelException(Errno.EINVAL, String.format("%s: implicit ODP (length SIZE_MAX) needs address 0, not 0x%x", verb, a.addr));
        }
        long iova = hasIova ? a.iova : a.addr;
        if ((a.addr & 4095) != (iova & 4095)) {
            throw new KernelException(Errno.EINVAL, String.format("%s: address 0x%x and iova 0x%x have different page offsets", verb, a.addr, iova));
        }
        return regUserMr(a.addr, a.length, iova, a.access);
    }

    /**
     * {@code UVERBS_METHOD_ADVISE_MR}: unknown flags EINVAL ({@code uverbs_get_flags32}), no SGE
     * returns at once, then the driver. The SGEs are copied so a caller reusing its array cannot
     * change what a background prefetch works on.
     */
    @Override
    public void adviseMr(int advice, int flags, IbvSge... sgList) {
        alive();
        if ((flags & ~ADVISE_MR_FLAG_FLUSH) != 0) {
            throw new KernelException(Errno.EINVAL, "ibv_advise_mr: unknown flags 0x" + Integer.toHexString(flags & ~ADVISE_MR_FLAG_FLUSH));
        }
        if (sgList == null || sgList.length == 0) {
            return;
        }
        IbvSge[] copy = new IbvSge[sgList.length];
        for (int i = 0; i < copy.length; i++) {
            if (sgList[i] == null) {
                throw new KernelException(Errno.EINVAL, "ibv_advise_mr: SGE " + i + " is null");
            }
            copy[i] = new IbvSge(sgList[i].addr, sgList[i].length, sgList[i].lkey);
        }
        ops.adviseMr(advice, flags, copy);
    }

    @Override
    public IbvQp createQp(IbvQpInitAttr a) {
        alive();
        if (a.qpType == null) {
            throw new KernelException(Errno.EINVAL, "ibv_create_qp: no QP type");
        }
        if (a.qpType == IbvQpType.XRC_RECV) {
            throw new KernelException(Errno.EINVAL, "ibv_create_qp: an XRC_RECV QP has no PD: create it in its XRC domain (ibv_create_qp_ex)");
        }
        boolean xrcSend = a.qpType == IbvQpType.XRC_SEND;
        if (xrcSend && (ctx.dev.attr.deviceCapFlags() & org.peerdirect.ib.core.verbs.IbvDeviceAttr.DEVICE_XRC) == 0) {
            throw new KernelException(Errno.EOPNOTSUPP, "ibv_create_qp: " + ctx.dev.name() + " does not report IBV_DEVICE_XRC");
        }
        UCq scq = cqOf(a.sendCq, "send");
        // an XRC send QP has no receive side: ib_uverbs_create_qp takes no receive CQ or SRQ and zeroes the receive caps (the driver ignores them)
        UCq rcq = xrcSend ? null : cqOf(a.recvCq, "receive");
        USrq srq = null;
        if (a.srq != null && !xrcSend) {
            if (!(a.srq instanceof USrq s) || s.pd.ctx != ctx) {
                throw new KernelException(Errno.EINVAL, "ibv_create_qp: the SRQ belongs to another context");
            }
            srq = s;
        }
        IbvDeviceAttr d = ctx.dev.attr;
        if (a.maxSendWr < 1 || a.maxSendWr > d.maxQpWr() || a.maxRecvWr < 0 || a.maxRecvWr > d.maxQpWr() || a.maxSendSge < 1
                || a.maxSendSge > d.maxSge() || a.maxRecvSge < 0 || a.maxRecvSge > d.maxSge() || a.maxInlineData < 0
                || a.maxInlineData > d.maxInlineData()) {
            throw new KernelException(Errno.EINVAL, String.format(
                    "ibv_create_qp: caps (%d/%d WRs, %d/%d SGEs, %d inline) exceed %s (max_qp_wr %d, max_sge %d, max_inline_data %d)",
                    a.maxSendWr, a.maxRecvWr, a.maxSendSge, a.maxRecvSge, a.maxInlineData, ctx.dev.name(), d.maxQpWr(), d.maxSge(),
                    d.maxInlineData()));
        }
        UQp qp;
        // under the context monitor: a CQ or SRQ cannot be destroyed between the check and the use count
        synchronized (ctx) {
            if (scq.destroyed() || rcq != null && rcq.destroyed() || srq != null && srq.destroyed()) {
                throw new KernelException(Errno.EINVAL, "ibv_create_qp: a CQ or the SRQ of the new QP is destroyed");
            }
            UEvents ev = new UEvents(ctx, IbvEventType.Element.QP);
            qp = new UQp(ctx, this, a, ops.createQp(a, scq.ops, rcq == null ? null : rcq.ops, srq == null ? null : srq.ops, ev), scq, rcq,
                    srq, null);
            ev.bind(qp);
            scq.usecnt.incrementAndGet();
            if (rcq != null) {
                rcq.usecnt.incrementAndGet();
            }
            if (srq != null) {
                srq.usecnt.incrementAndGet();
            }
            qps.add(qp);
        }
        return qp;
    }

    private UCq cqOf(Object cq, String which) {
        if (cq == null) {
            throw new KernelException(Errno.EINVAL, "ibv_create_qp: a QP needs a " + which + " CQ");
        }
        if (!(cq instanceof UCq c) || c.ctx != ctx) {
            throw new KernelException(Errno.EINVAL, "ibv_create_qp: the " + which + " CQ belongs to another context");
        }
        return c;
    }

    @Override
    public IbvSrq createSrq(int maxWr, int maxSge) {
        alive();
        IbvDeviceAttr d = ctx.dev.attr;
        if (maxWr < 1 || maxWr > d.maxSrqWr() || maxSge < 1 || maxSge > d.maxSrqSge()) {
            throw new KernelException(Errno.EINVAL, "ibv_create_srq: " + maxWr + " requests of " + maxSge + " SGEs exceed " + ctx.dev.name()
                    + " (max_srq_wr " + d.maxSrqWr() + ", max_srq_sge " + d.maxSrqSge() + ")");
        }
        UEvents ev = new UEvents(ctx, IbvEventType.Element.SRQ);
        USrq s = new USrq(this, ops.createSrq(maxWr, maxSge, ev), null, null);
        ev.bind(s);
        srqs.add(s);
        return s;
    }

    /**
     * {@code ib_uverbs_create_srq} of an XRC SRQ: the domain (this context's opening) and the CQ
     * it completes to; the use counts of both taken while the SRQ lives.
     */
    IbvSrq createXrcSrq(org.peerdirect.ib.core.verbs.IbvSrqInitAttrEx a) {
        alive();
        String verb = "ibv_create_srq_ex";
        UXrcd x = ctx.xrcdOf(a.xrcd, verb);
        if (a.cq == null) {
            throw new KernelException(Errno.EINVAL, verb + ": an XRC SRQ needs a CQ");
        }
        if (!(a.cq instanceof UCq cq) || cq.ctx != ctx) {
            throw new KernelException(Errno.EINVAL, verb + ": the CQ belongs to another context");
        }
        IbvDeviceAttr d = ctx.dev.attr;
        if (a.maxWr < 1 || a.maxWr > d.maxSrqWr() || a.maxSge < 1 || a.maxSge > d.maxSrqSge()) {
            throw new KernelException(Errno.EINVAL, verb + ": " + a.maxWr + " requests of " + a.maxSge + " SGEs exceed " + ctx.dev.name()
                    + " (max_srq_wr " + d.maxSrqWr() + ", max_srq_sge " + d.maxSrqSge() + ")");
        }
        x.domain.use();
        USrq s;
        try {
            synchronized (ctx) {
                if (cq.destroyed()) {
                    throw new KernelException(Errno.EINVAL, verb + ": the CQ is destroyed");
                }
                UEvents ev = new UEvents(ctx, IbvEventType.Element.SRQ);
                s = new USrq(this, ops.createXrcSrq(x.domain.ops, cq.ops, a.maxWr, a.maxSge, ev), x.domain, cq);
                ev.bind(s);
                cq.usecnt.incrementAndGet();
            }
        } catch (RuntimeException e) {
            x.domain.release();
            throw e;
        }
        srqs.add(s);
        return s;
    }

    @Override
    public IbvAh createAh(int dlid, int portNum) {
        return createAh(IbvAhAttr.lid(dlid, portNum));
    }

    /**
     * {@code ibv_create_ah} → {@code rdma_check_ah_attr}: the port exists; its link layer decides
     * the address (RoCE: a GRH with the GID, the LID means nothing; InfiniBand: a unicast LID, a
     * GRH optional); the GRH's fields in range ({@link UQp#checkAddress}).
     */
    @Override
    public IbvAh createAh(IbvAhAttr attr) {
        alive();
        if (attr == null) {
            throw new KernelException(Errno.EINVAL, "ibv_create_ah: no ah_attr");
        }
        IbvAhAttr a = attr.copy();
        ctx.checkPort(a.portNum);
        boolean roce = UQp.checkAddress(ctx.dev, a.portNum, a.isGlobal, a.dgid, a.sgidIndex, a.hopLimit, "ibv_create_ah");
        if (!roce && (a.dlid <= 0 || a.dlid >= 0xC000)) {
            throw new KernelException(Errno.EINVAL, "ibv_create_ah: DLID " + a.dlid + " is not a unicast LID (1..0xbfff)");
        }
        UAh ah = new UAh(this, ops.createAh(a));
        ahs.add(ah);
        return ah;
    }

    @Override
    public void dealloc() {
        synchronized (ctx) {
            if (deallocated) {
                return; // idempotent: deallocated before (by the user or the context's close)
            }
            if (!mrs.isEmpty() || !qps.isEmpty() || !srqs.isEmpty() || !ahs.isEmpty()) {
                throw new KernelException(Errno.EBUSY, String.format("ibv_dealloc_pd: PD still has %d MRs, %d QPs, %d SRQs, %d AHs",
                        mrs.size(), qps.size(), srqs.size(), ahs.size()));
            }
            deallocated = true;
        }
        ops.deallocPd();
        ctx.pds.remove(this);
    }

    /** Disassociation: QPs to error (where the driver still can), every MR's memory back. */
    void disassociate() {
        for (UQp qp : qps) {
            qp.toErrorQuietly();
        }
        for (UMr mr : mrs) {
            mr.release();
        }
    }

    /** Context close: QPs, SRQs, MRs, AHs, then the PD. */
    void destroyAll() {
        for (UQp qp : qps) {
            qp.destroy();
        }
        for (USrq s : srqs) {
            s.destroy();
        }
        for (UMr mr : mrs) {
            mr.release();
        }
        mrs.clear();
        for (UAh ah : ahs) {
            ah.destroy();
        }
        if (!deallocated) {
            deallocated = true;
            ops.deallocPd();
        }
    }
}
