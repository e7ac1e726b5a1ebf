package org.peerdirect.mlx4;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx3.ifc.Be.BE16;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.SrqContext;
import org.peerdirect.hca.engine.HwSrq;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.verbs.IbvSrqAttr;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.ib.core.verbs.IbvRecvWr;

/** {@code struct mlx4_ib_srq}: the hardware SRQ and its producer ring. */
final class Mlx4Srq implements IbSrqOps {

    final Mlx4Device dev;
    final HwSrq hw;
    final Mlx4RecvRing ring;
    final IbEvents events;
    private final int maxSge;

    Mlx4Srq(Mlx4Device dev, HwSrq hw, int maxSge, IbEvents events) {
        this.dev = dev;
        this.hw = hw;
        this.maxSge = maxSge;
        this.events = events;
        this.ring = new Mlx4RecvRing(hw.queue(), maxSge, hw::doorbell, dev.name + " SRQ " + hw.srqn);
    }

    @Override
    public void postSrqRecv(IbvRecvWr wr) {
        ring.post(wr);
    }

    /**
     * {@code mlx4_ib_modify_srq}: no resize; a limit up to the WQEs the SRQ holds (the kernel's
     * "below {@code msrq.max}", which counts the one WQE its list keeps back; this ring keeps none),
     * armed by {@code ARM_SRQ}.
     */
    @Override
    public void modifySrq(IbvSrqAttr attr, int mask) {
        if ((mask & IbvSrqAttr.MAX_WR) != 0) {
            throw new KernelException(Errno.EINVAL, dev.name + ": ibv_modify_srq: an SRQ cannot be resized on mlx4");
        }
        if ((mask & IbvSrqAttr.LIMIT) != 0) {
            int max = hw.queue().size();
            if (attr.srqLimit < 0 || attr.srqLimit > max) {
                throw new KernelException(Errno.EINVAL, String.format("%s: ibv_modify_srq: srq_limit %d is above the SRQ's %d WQEs", dev.name,
                        attr.srqLimit & 0xffff_ffffL, max));
            }
            dev.core.cmd.cmd(attr.srqLimit & 0xffff_ffffL, hw.srqn, 0, Mlx4Cmd.ARM_SRQ); // mlx4_ARM_SRQ
        }
    }

    /** {@code mlx4_ib_query_srq}: {@code QUERY_SRQ}'s limit watermark; max_wr the WQEs the ring holds. */
    @Override
    public IbvSrqAttr querySrq() {
        DmaCoherentPages.Page box = dev.core.dma.alloc();
        try {
            dev.core.cmd.box(0, box.iova(), hw.srqn, 0, Mlx4Cmd.QUERY_SRQ);
            return new IbvSrqAttr(hw.queue().size(), maxSge, box.mem().get(BE16, SrqContext.LIMIT_WATERMARK) & 0xffff);
        } finally {
            dev.core.dma.free(box);
        }
    }

    @Override
    public int srqNum() {
        return hw.srqn;
    }

    @Override
    public void destroySrq() {
        dev.hw2sw(0, hw.srqn, Mlx4Cmd.HW2SW_SRQ); // mlx4_srq_free
        if (dev.srqTable[hw.srqn] == this) {
            dev.srqTable[hw.srqn] = null;
        }
        dev.srqns.free(hw.srqn);
    }
}
