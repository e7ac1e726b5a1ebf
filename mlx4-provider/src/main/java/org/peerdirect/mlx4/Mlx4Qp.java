package org.peerdirect.mlx4;

import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;

/** {@code struct mlx4_ib_qp}: the driver's handle on an engine QP; post and poll go straight to it. */
final class Mlx4Qp implements IbvQp {

    private final Mlx4Pd pd;
    final HwQp hw;

    Mlx4Qp(Mlx4Pd pd, HwQp hw) {
        this.pd = pd;
        this.hw = hw;
    }

    @Override
    public int qpNum() {
        return hw.qpNum();
    }

    @Override
    public IbvQpType qpType() {
        return hw.qpType();
    }

    @Override
    public IbvQpState state() {
        return hw.state();
    }

    @Override
    public void modify(IbvQpAttr attr, int attrMask) {
        hw.modify(attr, attrMask);
    }

    @Override
    public IbvQpAttr query() {
        return hw.query();
    }

    @Override
    public void postSend(IbvSendWr wr) {
        hw.postSend(wr);
    }

    @Override
    public void postRecv(IbvRecvWr wr) {
        hw.postRecv(wr);
    }

    @Override
    public void destroy() {
        hw.destroy();
        pd.qps.remove(hw);
    }

    @Override
    public String toString() {
        return hw.toString();
    }
}
