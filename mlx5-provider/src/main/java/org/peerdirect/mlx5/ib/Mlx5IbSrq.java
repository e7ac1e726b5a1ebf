package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvSrqAttr;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.lib.Mlx5Cq;
import org.peerdirect.mlx5.lib.Mlx5Srq;

/**
 * mlx5_ib's SRQ verbs ({@code drivers/infiniband/hw/mlx5/srq.c}, with the commands of
 * {@code srq_cmd.c}) and the kernel half of one user SRQ ({@code struct mlx5_ib_srq} without the
 * WQE list, which is the library's {@link Mlx5Srq}): the pinned list and the commands that arm,
 * query and destroy it. A basic SRQ uses the {@code _SRQ} commands ({@code ARM_RQ} to arm), an
 * XRC SRQ the {@code _XRC_SRQ} ones; the library calls back through {@link Mlx5Srq.Control}.
 *
 * @see "drivers/infiniband/hw/mlx5/srq.c: mlx5_ib_create_srq, mlx5_ib_modify_srq, mlx5_ib_query_srq,
 *      mlx5_ib_destroy_srq, mlx5_ib_srq_event"
 */
final class Mlx5IbSrq implements Mlx5Srq.Control {

    private final Mlx5IbDev dev;
    private final boolean xrc;
    private final int srqn;
    /** WQEs in the list ({@code msrq.max}): max_wr + 1 rounded up to a power of two. */
    private final int wqes;
    /** Scatter entries a WQE holds ({@code msrq.max_gs}). */
    private final int sges;
    private final Mlx5IbUcontext.Pinned pinned;

    private Mlx5IbSrq(Mlx5IbDev dev, boolean xrc, int srqn, int wqes, int sges, Mlx5IbUcontext.Pinned pinned) {
        this.dev = dev;
        this.xrc = xrc;
        this.srqn = srqn;
        this.wqes = wqes;
        this.sges = sges;
        this.pinned = pinned;
    }

    /**
     * {@code mlx5_ib_create_srq} with libmlx5's {@code mlx5_create_srq}: the WQE list (max_wr + 1
     * WQEs, a power of two) and its doorbell record in the process's memory, pinned;
     * {@code CREATE_SRQ} with the SRQ context and the page list, or for an {@code IB_SRQT_XRC} SRQ
     * ({@code xrcd} not null) {@code CREATE_XRC_SRQ} with the domain and the CQ
     * ({@code create_xrc_srq_cmd}); its events routed to {@code events}.
     */
    static IbSrqOps create(Mlx5IbPd pd, Mlx5Xrcd xrcd, Mlx5Cq xcq, int maxWr, int maxSge, IbEvents events) {
        Mlx5IbDev dev = pd.ctx.dev;
        boolean xrc = xrcd != null;
        int[] g = Mlx5Srq.geometry(maxWr, maxSge);
        int wqes = g[0];
        int stride = g[1];
        Mlx5IbUcontext.Pinned p = pd.ctx.pin((long) wqes * stride);
        Mlx5Srq.initList(p.buf(), wqes, stride);
        int npages = (int) (p.buf().queueBytes / 4096);
        MemorySegment in = Mlx5CoreDev.input(xrc ? Mlx5Cmd.CREATE_XRC_SRQ : Mlx5Cmd.CREATE_SRQ, 0, (int) Srq.CREATE_SRQ_IN_PAS + 8 * npages);
        long c = Srq.CREATE_SRQ_IN_SRQC;
        if (xrc) {
            Srq.SRQC_XRCD.set(in, c, xrcd.xrcdn);
            Srq.SRQC_CQN.set(in, c, xcq.cqn);
        }
        Srq.SRQC_LOG_SRQ_SIZE.set(in, c, Integer.numberOfTrailingZeros(wqes));
        Srq.SRQC_LOG_RQ_STRIDE.set(in, c, Integer.numberOfTrailingZeros(stride) - 4);
        Srq.SRQC_PD.set(in, c, pd.pdn);
        in.set(BE64, c + Srq.SRQC_DBR_ADDR, p.pa(npages));
        for (int i = 0; i < npages; i++) {
            in.set(BE64, Srq.CREATE_SRQ_IN_PAS + 8L * i, p.pa(i));
        }
        int srqn;
        try {
            srqn = dev.execIndex(in, 16);
        } catch (RuntimeException e) {
            p.release();
            throw e;
        }
        dev.srqBufs.put(srqn, new Mlx5IbDev.SrqBuf(p, wqes, stride));
        dev.core.registerSrq(srqn, type -> srqEvent(events, type));
        int sges = Math.min(maxSge, (stride - Srq.NEXT_SEG_SIZE) / Qp.DS_SIZE);
        Mlx5Srq srq = new Mlx5Srq(srqn, p.buf(), wqes, stride, new Mlx5IbSrq(dev, xrc, srqn, wqes, sges, p));
        dev.srqTable[srqn] = srq;
        return srq;
    }

    /** {@code mlx5_ib_srq_event}: the limit and the catastrophic error; nothing else reaches an SRQ. */
    private static void srqEvent(IbEvents events, int type) {
        if (type == Eq.EVENT_SRQ_RQ_LIMIT) {
            events.event(IbvEventType.SRQ_LIMIT_REACHED);
        } else if (type == Eq.EVENT_SRQ_CATAS_ERROR) {
            events.event(IbvEventType.SRQ_ERR);
        }
    }

    /**
     * {@code mlx5_ib_modify_srq}: no resize; a limit below the WQE count ({@code msrq.max}),
     * armed by {@code ARM_RQ} ({@code ARM_XRC_SRQ} for an XRC SRQ).
     */
    @Override
    public void modify(IbvSrqAttr a, int mask) {
        if ((mask & IbvSrqAttr.MAX_WR) != 0) {
            throw new KernelException(Errno.EINVAL, dev.name() + ": ibv_modify_srq: resize SRQ is not supported");
        }
        if ((mask & IbvSrqAttr.LIMIT) != 0) {
            if (a.srqLimit < 0 || a.srqLimit >= wqes) {
                throw new KernelException(Errno.EINVAL, String.format("%s: ibv_modify_srq: srq_limit %d is not below the SRQ's %d WQEs",
                        dev.name(), a.srqLimit & 0xffff_ffffL, wqes));
            }
            MemorySegment in = Mlx5CoreDev.input(xrc ? Mlx5Cmd.ARM_XRC_SRQ : Mlx5Cmd.ARM_RQ, Srq.ARM_RQ_OP_MOD_SRQ, 16);
            Pages.INDEX24.set(in, 0, srqn);
            in.set(BE16, Srq.ARM_RQ_IN_LWM, (short) a.srqLimit);
            dev.cmd(() -> dev.core.exec(in, 16));
        }
    }

    /** {@code mlx5_ib_query_srq}: the limit from {@code QUERY_SRQ}'s lwm, max_wr one below the WQE count. */
    @Override
    public IbvSrqAttr query() {
        MemorySegment in = Mlx5CoreDev.input(xrc ? Mlx5Cmd.QUERY_XRC_SRQ : Mlx5Cmd.QUERY_SRQ, 0, 16);
        Pages.INDEX24.set(in, 0, srqn);
        MemorySegment out = dev.cmd(() -> dev.core.exec(in, Srq.QUERY_SRQ_OUT_LEN));
        return new IbvSrqAttr(wqes - 1, sges, Srq.SRQC_LWM.get(out, Srq.QUERY_SRQ_OUT_SRQC));
    }

    /** {@code mlx5_ib_destroy_srq}: no more events, out of the tables, {@code DESTROY_SRQ}, the list unpinned. */
    @Override
    public void destroy() {
        dev.core.unregisterSrq(srqn);
        dev.srqBufs.remove(srqn);
        dev.srqTable[srqn] = null;
        dev.destroyQuietly(xrc ? Mlx5Cmd.DESTROY_XRC_SRQ : Mlx5Cmd.DESTROY_SRQ, srqn);
        pinned.release();
    }
}
