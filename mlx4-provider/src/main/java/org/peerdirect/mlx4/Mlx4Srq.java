package org.peerdirect.mlx4;

import org.peerdirect.hca.engine.HwSrq;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.verbs.IbvRecvWr;

/** {@code struct mlx4_ib_srq}: the hardware SRQ and its producer ring. */
final class Mlx4Srq implements IbSrqOps {

    final Mlx4Device dev;
    final HwSrq hw;
    final Mlx4RecvRing ring;

    Mlx4Srq(Mlx4Device dev, HwSrq hw) {
        this.dev = dev;
        this.hw = hw;
        this.ring = new Mlx4RecvRing(hw.queue(), hw::doorbell, dev.name + " SRQ " + hw.srqn);
    }

    @Override
    public void postSrqRecv(IbvRecvWr wr) {
        ring.post(wr);
    }

    @Override
    public void destroySrq() {
        dev.cmd(() -> dev.engine.hw2swSrq(hw));
    }
}
