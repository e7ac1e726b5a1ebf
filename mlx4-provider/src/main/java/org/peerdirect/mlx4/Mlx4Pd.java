package org.peerdirect.mlx4;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.hca.engine.HwSrq;
import org.peerdirect.hca.engine.QpCaps;
import org.peerdirect.ib.core.provider.IbAhOps;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.provider.IbPdOps;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.kernel.dma.SgTable;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.MptEntry;
import org.peerdirect.hca.cx3.ifc.SrqContext;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx4.core.Mr;

/** {@code struct mlx4_ib_pd}: a PD number and the objects created in it. */
final class Mlx4Pd implements IbPdOps {

    final Mlx4Context ctx;
    final int pdn;

    Mlx4Pd(Mlx4Context ctx, int pdn) {
        this.ctx = ctx;
        this.pdn = pdn;
    }

    /** IB access flags to the MPT entry's {@code mlx4_perm} bits (local read always, as mlx4_ib_convert_access). */
    static int perm(int access) {
        int p = MptEntry.PERM_LOCAL_READ;
        if ((access & IbAccess.LOCAL_WRITE) != 0) {
            p |= MptEntry.PERM_LOCAL_WRITE;
        }
        if ((access & IbAccess.REMOTE_READ) != 0) {
            p |= MptEntry.PERM_REMOTE_READ;
        }
        if ((access & IbAccess.REMOTE_WRITE) != 0) {
            p |= MptEntry.PERM_REMOTE_WRITE;
        }
        if ((access & IbAccess.REMOTE_ATOMIC) != 0) {
            p |= MptEntry.PERM_ATOMIC;
        }
        return p;
    }

    /**
     * {@code mlx4_ib_reg_user_mr}: the umem (pinned, or peer with invalidation support), the MPT
     * entry with its MTT, then the invalidation notifier, which revokes the MPT before it returns
     * (OFED's mlx4 peer invalidation).
     */
    @Override
    public IbMrOps regUserMr(long addr, long length, int access) {
        Mlx4Device dev = ctx.dev;
        IbUmem umem = dev.umems.umemGet(ctx.process, dev, addr, length, access,
                UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP);
        Mr.Region region;
        try {
            region = dev.core.mr.enable(pdn, addr, length, perm(access), pages(umem.dmaBlocks()));
        } catch (RuntimeException e) {
            umem.stopInvalidationNotifier();
            umem.release();
            throw e;
        }
        Mlx4Mr mr = new Mlx4Mr(this, umem, region);
        try {
            umem.activateInvalidationNotifier(u -> mr.revokeOnInvalidate());
        } catch (RuntimeException e) {
            // the IB core revoked the umem meanwhile (it is stopping): undo the key and the umem
            mr.deregMr();
            throw e;
        }
        return mr;
    }

    /** The umem's DMA blocks as 4 KiB pages, the MTT's entries ({@code mlx4_ib_umem_write_mtt}). */
    static long[] pages(SgTable b) {
        long n = 0;
        for (int i = 0; i < b.nents(); i++) {
            n += (b.length(i) + 4095) >>> 12;
        }
        long[] pages = new long[(int) n];
        int k = 0;
        for (int i = 0; i < b.nents(); i++) {
            for (long off = 0; off < b.length(i); off += 4096) {
                pages[k++] = b.dmaAddress(i) + off;
            }
        }
        return pages;
    }

    @Override
    public IbQpOps createQp(IbvQpInitAttr a, IbCqOps sendCq, IbCqOps recvCq, IbSrqOps srq, IbEvents events) {
        Mlx4Device dev = ctx.dev;
        Mlx4Srq s = (Mlx4Srq) srq;
        QpCaps caps = new QpCaps(a.maxSendWr, a.maxRecvWr, a.maxSendSge, a.maxRecvSge, a.maxInlineData, a.sqSigAll);
        HwQp hw = dev.cmd(() -> dev.engine.createQp(pdn, a.qpType == IbvQpType.UD ? HcaDevice.ST_UD : HcaDevice.ST_RC, caps,
                dev.engine.cqByNumber(((Mlx4Cq) sendCq).cqn), dev.engine.cqByNumber(((Mlx4Cq) recvCq).cqn), s == null ? null : s.hw));
        Mlx4Qp qp = new Mlx4Qp(this, hw, a.qpType, s, events);
        dev.qpTable[hw.qpn] = qp;
        return qp;
    }

    @Override
    public IbSrqOps createSrq(int maxWr, int maxSge, IbEvents events) {
        Mlx4Device dev = ctx.dev;
        if (maxWr < 1 || maxWr > dev.queryDevice().maxSrqWr() || maxSge < 1 || maxSge > dev.queryDevice().maxSrqSge()) {
            throw new KernelException(Errno.ENOMEM, String.format("%s: SRQ of %d requests of %d SGEs exceeds the device (%d x %d)", dev.name,
                    maxWr, maxSge, dev.queryDevice().maxSrqWr(), dev.queryDevice().maxSrqSge()));
        }
        // mlx4_ib_create_srq: 2^n WQEs, each a next segment and maxSge data segments, the stride a power of two
        int log = 32 - Integer.numberOfLeadingZeros(maxWr - 1);
        int stride = Integer.highestOneBit(16 * (1 + maxSge) - 1) << 1;
        int srqn = dev.srqns.alloc();
        DmaCoherentPages.Page box = dev.core.dma.alloc();
        try {
            MemorySegment c = box.mem();
            c.set(BE32, SrqContext.STATE_LOGSIZE_SRQN, log << 24 | srqn);
            c.set(U8, SrqContext.LOGSTRIDE, (byte) (Integer.numberOfTrailingZeros(stride) - 4));
            c.set(BE32, SrqContext.PD, pdn);
            dev.core.cmd.box(box.iova(), 0, srqn, 0, Mlx4Cmd.SW2HW_SRQ);
        } catch (RuntimeException e) {
            dev.srqns.free(srqn);
            throw e;
        } finally {
            dev.core.dma.free(box);
        }
        HwSrq hw = dev.hw.srq(srqn);
        Mlx4Srq s = new Mlx4Srq(dev, hw, maxSge, events);
        dev.srqTable[srqn] = s;
        return s;
    }

    @Override
    public IbAhOps createAh(org.peerdirect.ib.core.verbs.IbvAhAttr a) {
        ctx.dev.checkPort(a.portNum);
        return IbAhOps.addressVector(a); // InfiniBand ports: the LID routes; a GRH is carried in the AV, not needed inside the subnet
    }

    @Override
    public void deallocPd() {
        ctx.dev.freePdn(pdn);
    }
}
