package org.peerdirect.mlx4;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.peerdirect.hca.engine.HwAh;
import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.hca.engine.HwSrq;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvAh;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/** {@code struct mlx4_ib_pd} and the objects created in it. */
final class Mlx4Pd implements IbvPd {

    final Mlx4Context ctx;
    final int pdn;
    final List<Mlx4Mr> mrs = new CopyOnWriteArrayList<>();
    final List<HwQp> qps = new CopyOnWriteArrayList<>();
    final List<HwSrq> srqs = new CopyOnWriteArrayList<>();
    private volatile boolean deallocated;

    Mlx4Pd(Mlx4Context ctx, int pdn) {
        this.ctx = ctx;
        this.pdn = pdn;
    }

    private void alive() {
        ctx.alive();
        if (deallocated) {
            throw new KernelException(Errno.EINVAL, ctx.dev.name + ": PD " + pdn + " was deallocated");
        }
    }

    @Override
    public IbvContext context() {
        return ctx;
    }

    /**
     * {@code mlx4_ib_reg_user_mr}: the umem (pinned, or peer with invalidation support), the MPT
     * entry with its translation, then the invalidation notifier, which revokes the MPT before it
     * returns (OFED's mlx4 peer invalidation).
     */
    @Override
    public IbvMr regMr(long addr, long length, int access) {
        alive();
        if ((access & ~IbAccess.SUPPORTED) != 0) {
            throw new KernelException(Errno.EINVAL, "ibv_reg_mr: unknown access flags 0x" + Integer.toHexString(access & ~IbAccess.SUPPORTED));
        }
        if ((access & (IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC)) != 0 && (access & IbAccess.LOCAL_WRITE) == 0) {
            throw new KernelException(Errno.EINVAL, "ibv_reg_mr: REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE (ib_check_mr_access)");
        }
        if ((access & IbAccess.ON_DEMAND) != 0) {
            throw new KernelException(Errno.EOPNOTSUPP, "ibv_reg_mr: Operation not supported: mlx4 has no on-demand paging (IB_ACCESS_ON_DEMAND)");
        }
        IbUmem umem = ctx.dev.umems.umemGet(ctx.process, ctx.dev, addr, length, access,
                UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP);
        int key;
        try {
            key = ctx.dev.engine.sw2hwMpt(pdn, addr, length, access, umem.dmaBlocks());
        } catch (RuntimeException e) {
            umem.stopInvalidationNotifier();
            umem.release();
            throw e;
        }
        Mlx4Mr mr = new Mlx4Mr(this, umem, key, access);
        try {
            umem.activateInvalidationNotifier(u -> mr.revokeOnInvalidate());
        } catch (RuntimeException e) {
            // the IB core revoked the umem meanwhile (it is stopping): undo the key and the umem
            ctx.dev.engine.freeMpt(key);
            umem.release();
            throw e;
        }
        mrs.add(mr);
        if (ctx.dev.removed()) {
            mr.releaseMemory(); // removed while registering: the removal did not see this MR
        }
        return mr;
    }

    @Override
    public IbvQp createQp(IbvQpInitAttr attr) {
        alive();
        HwQp qp = ctx.dev.engine.createQp(pdn, attr).bindProcess(ctx.process);
        qps.add(qp);
        return new Mlx4Qp(this, qp);
    }

    @Override
    public IbvSrq createSrq(int maxWr, int maxSge) {
        alive();
        HwSrq s = ctx.dev.engine.createSrq(pdn, maxWr, maxSge);
        srqs.add(s);
        return s;
    }

    @Override
    public IbvAh createAh(int dlid, int portNum) {
        alive();
        ctx.dev.engine.port(portNum);
        if (dlid <= 0 || dlid >= 0xC000) {
            throw new KernelException(Errno.EINVAL, "ibv_create_ah: DLID " + dlid + " is not a unicast LID");
        }
        return new HwAh(dlid, portNum);
    }

    @Override
    public void dealloc() {
        if (!mrs.isEmpty() || !qps.isEmpty() || !srqs.isEmpty()) {
            throw new KernelException(Errno.EBUSY, String.format("ibv_dealloc_pd: PD %d still has %d MRs, %d QPs, %d SRQs", pdn,
                    mrs.size(), qps.size(), srqs.size()));
        }
        deallocated = true;
        ctx.pds.remove(this);
    }

    void deviceRemoved() {
        for (Mlx4Mr mr : mrs) {
            mr.releaseMemory();
        }
    }

    void destroyAll() {
        for (HwQp qp : qps) {
            qp.destroy();
        }
        qps.clear();
        for (HwSrq s : srqs) {
            s.destroy();
        }
        srqs.clear();
        for (Mlx4Mr mr : mrs) {
            mr.dereg();
        }
        deallocated = true;
    }
}
