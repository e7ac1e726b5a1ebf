package org.peerdirect.mlx5.ib;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.lib.Mlx5Qp;

/**
 * An XRC target QP ({@code create_xrc_tgt_qp}): a kernel object with no queues, so no part of it
 * lives in the user's library. {@code CREATE_QP} with {@code st} XRC, {@code no_sq}, the user's
 * domain and {@code rq_type} SRQ; what it receives goes to the XRC SRQ each message names, and
 * completes to that SRQ's CQ. Deviation, stated: mlx5_ib gives it the driver's internal PD, CQ
 * and SRQ ({@code devr->p0}, {@code c0}, {@code s0}); the model reads none of them for a target,
 * so the driver passes 0 and creates no such internal objects.
 *
 * <p>Lock: {@code this} guards {@link #attr} and {@link #state} (modify and query are commands).
 */
final class Mlx5XrcTgtQp implements IbQpOps {
    private final Mlx5IbDev dev;
    private final int qpn;
    private final IbvQpAttr attr = new IbvQpAttr();
    private volatile IbvQpState state = IbvQpState.RESET;

    private Mlx5XrcTgtQp(Mlx5IbDev dev, int qpn) {
        this.dev = dev;
        this.qpn = qpn;
    }

    static Mlx5XrcTgtQp create(Mlx5IbDev dev, Mlx5Xrcd xrcd, int uar, IbEvents events) {
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_QP, 0, (int) Qp.CREATE_QP_IN_PAS);
        long c = Qp.IN_QPC;
        Qp.QPC_ST.set(in, c, Qp.ST_XRC);
        Qp.QPC_PM_STATE.set(in, c, Qp.PM_MIGRATED);
        Qp.QPC_LOG_MSG_MAX.set(in, c, 30);
        Qp.QPC_RQ_TYPE.set(in, c, Srq.RQ_SRQ);
        Qp.QPC_NO_SQ.set(in, c, 1);
        Qp.QPC_XRCD.set(in, c, xrcd.xrcdn);
        Qp.QPC_UAR_PAGE.set(in, c, uar);
        Qp.QPC_PRI_VHCA_PORT_NUM.set(in, c, 1);
        int qpn = dev.execIndex(in, 16);
        Mlx5XrcTgtQp qp = new Mlx5XrcTgtQp(dev, qpn);
        dev.core.registerQp(qpn, type -> {
            IbvEventType t = Mlx5IbQp.qpEvent(type);
            if (t != null) {
                events.event(t);
            }
        });
        return qp;
    }

    @Override
    public int qpNum() {
        return qpn;
    }

    @Override
    public IbvQpState state() {
        return state;
    }

    @Override
    public synchronized void modifyQp(IbvQpAttr a, int mask) {
        IbvQpState to = (mask & IbvQpAttr.STATE) != 0 ? a.qpState : state;
        Mlx5IbQp.modifyQp(dev, qpn, attr, a, mask, state, to);
        Mlx5Qp.remember(attr, a, mask);
        state = to;
    }

    @Override
    public synchronized IbvQpAttr queryQp() {
        state = Mlx5IbQp.queryState(dev, qpn);
        IbvQpAttr a = attr.copy();
        a.qpState = state;
        return a;
    }

    /** An XRC receive QP has no send queue. */
    @Override
    public void postSend(IbvSendWr wr) {
        throw new KernelException(Errno.EINVAL, String.format("%s: QP 0x%x is an XRC receive QP: it has no send queue", dev.name(), qpn));
    }

    /** Nor a receive queue: its messages are received by the XRC SRQs they name. */
    @Override
    public void postRecv(IbvRecvWr wr) {
        throw new KernelException(Errno.EINVAL, String.format("%s: QP 0x%x is an XRC receive QP: receives are posted to the XRC SRQs of its domain",
                dev.name(), qpn));
    }

    @Override
    public void destroyQp() {
        dev.core.unregisterQp(qpn);
        dev.destroyQuietly(Mlx5Cmd.DESTROY_QP, qpn);
    }

    @Override
    public String toString() {
        return String.format("%s XRC receive QP 0x%x", dev.name(), qpn);
    }
}
