package org.peerdirect.mlx4;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
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
     * {@code mlx4_ib_create_cq}: a CQN from the table ({@code mlx4_cq_alloc}), the ring and its
     * context to the device ({@link Mlx4Cq#create}). The ring is the driver's DMA memory, as a
     * kernel CQ's ({@code mlx4_ib_alloc_cq_buf}); libmlx4 would allocate it in the process and
     * register it, which changes where the pages come from, not what the device writes.
     */
    @Override
    public IbCqOps createCq(int cqe, IbCqEvents events) {
        int max = dev.core.caps().maxCqSz() - 1;
        if (cqe < 1 || cqe > max) {
            throw new KernelException(Errno.ENOMEM, dev.name + ": CQ size " + cqe + " is not 1.." + max);
        }
        int log = 32 - Integer.numberOfLeadingZeros(cqe - 1);
        int cqn = dev.cqns.alloc();
        Mlx4Cq cq;
        try {
            cq = Mlx4Cq.create(dev, cqn, log, events);
        } catch (RuntimeException e) {
            dev.cqns.free(cqn);
            throw e;
        }
        dev.cqTable[cqn] = cq;
        return cq;
    }

    @Override
    public void deallocUcontext() {
        // the core destroyed every object; the UAR page would go here
    }
}
