package org.peerdirect.mlx5.ib;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.provider.IbAhOps;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.provider.IbPdOps;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.provider.IbXrcdOps;
import org.peerdirect.ib.core.verbs.IbvAhAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.mlx5.lib.Mlx5Cq;

/**
 * {@code struct mlx5_ib_pd}: a PD number ({@code ALLOC_PD} at {@code mlx5_ib_alloc_pd},
 * {@code DEALLOC_PD} at {@link #deallocPd}). The objects created in it are made where the kernel
 * makes them: MRs in {@link Mlx5Mr} ({@code mr.c}), QPs in {@link Mlx5IbQp} ({@code qp.c}),
 * SRQs in {@link Mlx5IbSrq} ({@code srq.c}), address handles in {@link Mlx5IbAh} ({@code ah.c}).
 *
 * @see "drivers/infiniband/hw/mlx5/main.c: mlx5_ib_alloc_pd, mlx5_ib_dealloc_pd"
 */
final class Mlx5IbPd implements IbPdOps {

    final Mlx5IbUcontext ctx;
    final int pdn;

    Mlx5IbPd(Mlx5IbUcontext ctx, int pdn) {
        this.ctx = ctx;
        this.pdn = pdn;
    }

    /** {@link Mlx5Mr#adviseMr}. */
    @Override
    public void adviseMr(int advice, int flags, IbvSge[] sgList) {
        Mlx5Mr.adviseMr(this, advice, flags, sgList);
    }

    /** {@link Mlx5Mr#regUserMr}. */
    @Override
    public IbMrOps regUserMr(long addr, long length, int access) {
        return Mlx5Mr.regUserMr(this, addr, length, access);
    }

    /** {@link Mlx5Mr#regUserMr(Mlx5IbPd, long, long, long, int)}: {@code ibv_reg_mr_iova}. */
    @Override
    public IbMrOps regUserMr(long addr, long length, long iova, int access) {
        return Mlx5Mr.regUserMr(this, addr, length, iova, access);
    }

    /** {@link Mlx5Mr#regUserMrDmabuf}. */
    @Override
    public IbMrOps regUserMrDmabuf(long offset, long length, long iova, int fd, int access) {
        return Mlx5Mr.regUserMrDmabuf(this, offset, length, iova, fd, access);
    }

    @Override
    public boolean hasRegUserMrDmabuf() {
        return true;
    }

    /** {@link Mlx5IbQp#create}. */
    @Override
    public IbQpOps createQp(IbvQpInitAttr a, IbCqOps sendCq, IbCqOps recvCq, IbSrqOps srq, IbEvents events) {
        return Mlx5IbQp.create(this, a, sendCq, recvCq, srq, events);
    }

    /** {@link Mlx5IbSrq#create} of a basic SRQ. */
    @Override
    public IbSrqOps createSrq(int maxWr, int maxSge, IbEvents events) {
        return Mlx5IbSrq.create(this, null, null, maxWr, maxSge, events);
    }

    /** {@link Mlx5IbSrq#create} of an {@code IB_SRQT_XRC} SRQ in {@code xrcd}, completing to {@code cq}. */
    @Override
    public IbSrqOps createXrcSrq(IbXrcdOps xrcd, IbCqOps cq, int maxWr, int maxSge, IbEvents events) {
        return Mlx5IbSrq.create(this, (Mlx5Xrcd) xrcd, (Mlx5Cq) cq, maxWr, maxSge, events);
    }

    /** {@link Mlx5IbAh#create}. */
    @Override
    public IbAhOps createAh(IbvAhAttr a) {
        return Mlx5IbAh.create(a);
    }

    /** {@code mlx5_ib_dealloc_pd}: {@code DEALLOC_PD} (quiet when the device is gone). */
    @Override
    public void deallocPd() {
        ctx.dev.destroyQuietly(Mlx5Cmd.DEALLOC_PD, pdn);
    }
}
