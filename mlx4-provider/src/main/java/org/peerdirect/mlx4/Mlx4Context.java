package org.peerdirect.mlx4;

import org.peerdirect.hca.engine.HwCq;
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

    @Override
    public IbCqOps createCq(int cqe, IbCqEvents events) {
        HwCq hw = dev.cmd(() -> dev.engine.sw2hwCq(cqe));
        Mlx4Cq cq = new Mlx4Cq(dev, hw, events);
        dev.cqTable[hw.cqn] = cq;
        return cq;
    }

    @Override
    public void deallocUcontext() {
        // the core destroyed every object; the UAR page would go here
    }
}
