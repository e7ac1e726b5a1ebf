package org.peerdirect.mlx4;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.SrqContext;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSrqAttr;
import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx4.lib.Mlx4Srq;

/**
 * {@code struct mlx4_ib_srq} ({@code drivers/infiniband/hw/mlx4/srq.c}) over libmlx4's SRQ
 * ({@link Mlx4Srq}): the buffer of 2^n WQEs (n for {@code max_wr + 1}, the list keeps one back) in
 * the process, pinned with its MTT written; {@code SW2HW_SRQ} with the context (size, stride, PD,
 * MTT, doorbell record) at an SRQN of the driver's bitmap.
 */
final class Mlx4IbSrq implements IbSrqOps {

    final Mlx4Device dev;
    final int srqn;
    final Mlx4Srq lib;
    private final Mlx4Context.Pinned buf;
    final IbEvents events;
    private final int maxSge;

    private Mlx4IbSrq(Mlx4Device dev, int srqn, Mlx4Srq lib, Mlx4Context.Pinned buf, int maxSge, IbEvents events) {
        this.dev = dev;
        this.srqn = srqn;
        this.lib = lib;
        this.buf = buf;
        this.maxSge = maxSge;
        this.events = events;
    }

    /** {@code mlx4_ib_create_srq} with libmlx4's {@code mlx4_create_srq}. */
    static Mlx4IbSrq create(Mlx4Pd pd, int maxWr, int maxSge, IbEvents events) {
        Mlx4Device dev = pd.ctx.dev;
        if (maxWr < 1 || maxWr > dev.queryDevice().maxSrqWr() || maxSge < 1 || maxSge > dev.queryDevice().maxSrqSge()) {
            throw new KernelException(Errno.ENOMEM, String.format("%s: SRQ of %d requests of %d SGEs exceeds the device (%d x %d)", dev.name,
                    maxWr, maxSge, dev.queryDevice().maxSrqWr(), dev.queryDevice().maxSrqSge()));
        }
        int log = 32 - Integer.numberOfLeadingZeros(maxWr); // 2^log >= maxWr + 1
        int shift = Mlx4Srq.shift(maxSge);
        Mlx4Context.Pinned p = pd.ctx.pin((long) 1 << (log + shift));
        Mlx4Srq lib = new Mlx4Srq(p.buf(), 1 << log, shift, maxSge, dev.name + " SRQ");
        int srqn;
        try {
            srqn = dev.srqns.alloc();
        } catch (RuntimeException e) {
            p.release();
            throw e;
        }
        DmaCoherentPages.Page box = null;
        try {
            box = dev.core.dma.alloc();
            MemorySegment c = box.mem();
            c.set(BE32, SrqContext.STATE_LOGSIZE_SRQN, log << 24 | srqn);
            c.set(U8, SrqContext.LOGSTRIDE, (byte) (shift - 4));
            c.set(BE32, SrqContext.PD, pd.pdn);
            long mtt = p.mtt().addr();
            c.set(U8, SrqContext.LOG_PAGE_SIZE, (byte) 0);
            c.set(U8, SrqContext.MTT_BASE_ADDR_H, (byte) (mtt >>> 32));
            c.set(BE32, SrqContext.MTT_BASE_ADDR_L, (int) mtt);
            c.set(BE64, SrqContext.DB_REC_ADDR, p.dbDma());
            dev.core.cmd.box(box.iova(), 0, srqn, 0, Mlx4Cmd.SW2HW_SRQ);
        } catch (RuntimeException e) {
            dev.srqns.free(srqn);
            p.release();
            throw e;
        } finally {
            dev.core.dma.free(box);
        }
        Mlx4IbSrq s = new Mlx4IbSrq(dev, srqn, lib, p, maxSge, events);
        dev.srqTable[srqn] = s;
        return s;
    }

    @Override
    public void postSrqRecv(IbvRecvWr wr) {
        lib.post(wr);
    }

    /**
     * {@code mlx4_ib_modify_srq}: no resize; a limit below the WQEs the SRQ holds ({@code msrq.max},
     * which counts the one its list keeps back), armed by {@code ARM_SRQ}.
     */
    @Override
    public void modifySrq(IbvSrqAttr attr, int mask) {
        if ((mask & IbvSrqAttr.MAX_WR) != 0) {
            throw new KernelException(Errno.EINVAL, dev.name + ": ibv_modify_srq: an SRQ cannot be resized on mlx4");
        }
        if ((mask & IbvSrqAttr.LIMIT) != 0) {
            int max = lib.wqes - 1;
            if (attr.srqLimit < 0 || attr.srqLimit > max) {
                throw new KernelException(Errno.EINVAL, String.format("%s: ibv_modify_srq: srq_limit %d is above the SRQ's %d WQEs", dev.name,
                        attr.srqLimit & 0xffff_ffffL, max));
            }
            dev.core.cmd.cmd(attr.srqLimit & 0xffff_ffffL, srqn, 0, Mlx4Cmd.ARM_SRQ); // mlx4_ARM_SRQ
        }
    }

    /** {@code mlx4_ib_query_srq}: {@code QUERY_SRQ}'s limit watermark; max_wr the requests the list takes. */
    @Override
    public IbvSrqAttr querySrq() {
        DmaCoherentPages.Page box = dev.core.dma.alloc();
        try {
            dev.core.cmd.box(0, box.iova(), srqn, 0, Mlx4Cmd.QUERY_SRQ);
            return new IbvSrqAttr(lib.wqes - 1, maxSge, box.mem().get(BE16, SrqContext.LIMIT_WATERMARK) & 0xffff);
        } finally {
            dev.core.dma.free(box);
        }
    }

    @Override
    public int srqNum() {
        return srqn;
    }

    /** {@code mlx4_ib_destroy_srq}: {@code HW2SW_SRQ} (refused, EBUSY, while a QP uses it), then the buffer and the SRQN. */
    @Override
    public void destroySrq() {
        dev.hw2sw(0, srqn, Mlx4Cmd.HW2SW_SRQ); // mlx4_srq_free
        if (dev.srqTable[srqn] == this) {
            dev.srqTable[srqn] = null;
        }
        buf.release();
        dev.srqns.free(srqn);
    }
}
