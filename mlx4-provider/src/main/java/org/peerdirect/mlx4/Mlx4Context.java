package org.peerdirect.mlx4;

import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx3.ifc.CqContext;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.engine.HwCq;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx4.core.DmaPages;
import org.peerdirect.ib.core.provider.IbCqEvents;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.provider.IbPdOps;
import org.peerdirect.ib.core.provider.IbUcontextOps;
import org.peerdirect.kernel.mm.AddressSpace;

/** {@code struct mlx4_ib_ucontext}: the device opened by one process. */
final class Mlx4Context implements IbUcontextOps {

    final Mlx4Device dev;
    final AddressSpace process;

    Mlx4Context(Mlx4Device dev, AddressSpace process) {
        this.dev = dev;
        this.process = process;
    }

    @Override
    public IbPdOps allocPd() {
        return new Mlx4Pd(this, dev.allocPdn());
    }

    /**
     * {@code mlx4_ib_create_cq} + {@code mlx4_cq_alloc}: a CQN from the table, its context (size,
     * the driver's UAR, the completion EQ) to the device by {@code SW2HW_CQ}.
     */
    @Override
    public IbCqOps createCq(int cqe, IbCqEvents events) {
        int max = dev.core.caps().maxCqSz() - 1;
        if (cqe < 1 || cqe > max) {
            throw new KernelException(Errno.ENOMEM, dev.name + ": CQ size " + cqe + " is not 1.." + max);
        }
        int log = 32 - Integer.numberOfLeadingZeros(cqe - 1);
        int cqn = dev.cqns.alloc();
        DmaPages.Page box = dev.core.dma.alloc();
        try {
            MemorySegment c = box.mem();
            c.set(BE32, CqContext.LOGSIZE_USRPAGE, log << 24 | dev.uarPage());
            c.set(U8, CqContext.COMP_EQN, (byte) dev.core.compEqn());
            dev.core.cmd.box(box.iova(), 0, cqn, 0, Mlx4Cmd.SW2HW_CQ);
        } catch (RuntimeException e) {
            dev.cqns.free(cqn);
            throw e;
        } finally {
            dev.core.dma.free(box);
        }
        HwCq hw = dev.hw.cq(cqn);
        Mlx4Cq cq = new Mlx4Cq(dev, hw, events);
        dev.cqTable[cqn] = cq;
        return cq;
    }

    @Override
    public void deallocUcontext() {
        // the core destroyed every object; the UAR page would go here
    }
}
