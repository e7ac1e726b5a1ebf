package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.lib.Mlx5Cq;
import org.peerdirect.mlx5.lib.Mlx5Qp;
import org.peerdirect.mlx5.lib.Mlx5Srq;

/**
 * mlx5_ib's QP verbs ({@code drivers/infiniband/hw/mlx5/qp.c}) and the kernel half of one user
 * QP ({@code struct mlx5_ib_qp} without the queues, which are the library's {@link Mlx5Qp}): the
 * pinned queue buffer and the commands that create, transition, query and destroy the QP. The
 * library calls back into it through {@link Mlx5Qp.Control}. The XRC target QP, a kernel object
 * with no queues, is {@link Mlx5XrcTgtQp}; it shares {@link #modifyQp}, {@link #queryState} and
 * {@link #qpEvent}.
 *
 * @see "drivers/infiniband/hw/mlx5/qp.c: mlx5_ib_create_qp, create_qp_common, mlx5_ib_modify_qp,
 *      __mlx5_ib_modify_qp, mlx5_ib_query_qp, mlx5_ib_destroy_qp, mlx5_ib_qp_event"
 */
final class Mlx5IbQp implements Mlx5Qp.Control {

    private final Mlx5IbDev dev;
    /** The library's queue buffer (RQ, SQ, doorbell record), pinned until destroy or the reset flow. */
    private final Mlx5IbUcontext.Pinned pinned;

    private Mlx5IbQp(Mlx5IbDev dev, Mlx5IbUcontext.Pinned pinned) {
        this.dev = dev;
        this.pinned = pinned;
    }

    /**
     * {@code mlx5_ib_create_qp} with libmlx5's {@code mlx5_create_qp}: the library's buffer (RQ,
     * then SQ, then the doorbell record) in the process's memory, pinned; {@code CREATE_QP} with
     * the QPC and the page list; the library's QP over the buffer, its affiliated events routed to
     * {@code events}, and its buffer known to the page-fault handler.
     */
    static IbQpOps create(Mlx5IbPd pd, IbvQpInitAttr a, IbCqOps sendCq, IbCqOps recvCq, IbSrqOps srq, IbEvents events) {
        Mlx5IbDev dev = pd.ctx.dev;
        if (a.qpType != IbvQpType.RC && a.qpType != IbvQpType.UD && a.qpType != IbvQpType.XRC_SEND) {
            throw new KernelException(Errno.EOPNOTSUPP, dev.name() + ": QP type " + a.qpType + " is not built on mlx5 (RC, UD, XRC_SEND are)");
        }
        boolean xrc = a.qpType == IbvQpType.XRC_SEND;
        int maxInline = a.maxInlineData;
        // a QP on an SRQ has no receive queue of its own (rq_type SRQ, log_rq_size 0); an XRC send QP none at all
        int[] g = Mlx5Qp.geometry(a.qpType, a.maxSendWr, a.maxSendSge, maxInline, srq != null || xrc ? 0 : a.maxRecvWr, a.maxRecvSge);
        int logSq = g[0];
        int logRq = g[1];
        int rqStride = 16 << g[2];
        long rqBytes = logRq < 0 ? 0 : (long) rqStride << logRq;
        Mlx5IbUcontext.Pinned p = pd.ctx.pin(rqBytes + ((long) Qp.SEND_WQE_BB << logSq));
        int qpn;
        try {
            qpn = dev.execIndex(createQpIn(pd, a.qpType, g, p, (Mlx5Cq) sendCq, (Mlx5Cq) (xrc ? sendCq : recvCq), (Mlx5Srq) srq), 16);
        } catch (RuntimeException e) {
            p.release();
            throw e;
        }
        int bfSize = 1 << Math.max(0, dev.core.cap(HcaCap.LOG_BF_REG_SIZE) - 1);
        Mlx5Qp qp = new Mlx5Qp(qpn, a.qpType, p.buf(), pd.ctx.uar, bfSize, logSq, logRq, rqStride, a.maxSendSge, a.maxRecvSge, maxInline,
                a.sqSigAll, (Mlx5Cq) sendCq, xrc ? null : (Mlx5Cq) recvCq, (Mlx5Srq) srq, new Mlx5IbQp(dev, p));
        dev.core.registerQp(qpn, type -> {
            IbvEventType t = qpEvent(type);
            if (t != null) {
                events.event(t);
            }
        });
        dev.qpTable[qpn] = qp;
        dev.qpBufs.put(qpn, new Mlx5IbDev.QpBuf(p, rqBytes, 1 << logSq, logRq < 0 ? 0 : 1 << logRq, logRq < 0 ? 0 : rqStride,
                a.qpType == IbvQpType.UD));
        return qp;
    }

    /**
     * {@code create_qp_common}'s {@code CREATE_QP} input: the QPC for a QP of {@code type} with the
     * geometry {@code g} ({@link Mlx5Qp#geometry}) over the pinned buffer {@code p}, then its page list.
     */
    private static MemorySegment createQpIn(Mlx5IbPd pd, IbvQpType type, int[] g, Mlx5IbUcontext.Pinned p, Mlx5Cq sendCq, Mlx5Cq recvCq,
            Mlx5Srq srq) {
        boolean xrc = type == IbvQpType.XRC_SEND;
        int logRq = g[1];
        int npages = (int) (p.buf().queueBytes / 4096);
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_QP, 0, (int) Qp.CREATE_QP_IN_PAS + 8 * npages);
        long c = Qp.IN_QPC;
        Qp.QPC_ST.set(in, c, type == IbvQpType.UD ? Qp.ST_UD : xrc ? Qp.ST_XRC : Qp.ST_RC);
        Qp.QPC_PM_STATE.set(in, c, Qp.PM_MIGRATED);
        Qp.QPC_PD.set(in, c, pd.pdn);
        Qp.QPC_LOG_MSG_MAX.set(in, c, 30);
        Qp.QPC_RQ_TYPE.set(in, c, srq != null || xrc ? Srq.RQ_SRQ : logRq < 0 ? Qp.RQ_ZERO_LEN : Qp.RQ_REGULAR);
        if (xrc) {
            // create_user_qp for XRC_INI: the driver's initiator domain (devr->xrcdn1); its receive CQ and SRQ
            // (devr->c0, devr->s0) are never used: the send CQ stands for c0, and no SRQ is named
            Qp.QPC_XRCD.set(in, c, pd.ctx.dev.xrcdForInitiators());
        }
        if (srq != null) {
            Srq.QPC_SRQN.set(in, c, srq.srqn);
        }
        Qp.QPC_LOG_RQ_SIZE.set(in, c, Math.max(0, logRq));
        Qp.QPC_LOG_RQ_STRIDE.set(in, c, g[2]);
        Qp.QPC_LOG_SQ_SIZE.set(in, c, g[0]);
        Qp.QPC_UAR_PAGE.set(in, c, pd.ctx.uar.index);
        Qp.QPC_CQN_SND.set(in, c, sendCq.cqn);
        Qp.QPC_CQN_RCV.set(in, c, recvCq.cqn);
        Qp.QPC_PRI_VHCA_PORT_NUM.set(in, c, 1);
        in.set(BE64, c + Qp.QPC_DBR_ADDR, p.pa(npages));
        for (int i = 0; i < npages; i++) {
            in.set(BE64, Qp.CREATE_QP_IN_PAS + 8L * i, p.pa(i));
        }
        return in;
    }

    @Override
    public void modify(Mlx5Qp q, IbvQpAttr cur, IbvQpAttr attr, int mask, IbvQpState from, IbvQpState to) {
        modifyQp(dev, q.qpn, cur, attr, mask, from, to);
    }

    @Override
    public IbvQpState queryState(Mlx5Qp q) {
        return queryState(dev, q.qpn);
    }

    /** {@code mlx5_ib_destroy_qp}: no more events, out of the tables, {@code DESTROY_QP}, the buffer unpinned. */
    @Override
    public void destroy(Mlx5Qp q) {
        dev.core.unregisterQp(q.qpn);
        if (dev.qpTable[q.qpn] == q) {
            dev.qpTable[q.qpn] = null;
        }
        dev.qpBufs.remove(q.qpn);
        dev.destroyQuietly(Mlx5Cmd.DESTROY_QP, q.qpn);
        pinned.release();
    }

    /** {@code mlx5_ib_qp_event}: the EQE type's IB event, or null for one it does not map. */
    static IbvEventType qpEvent(int type) {
        return switch (type) {
            case Eq.EVENT_PATH_MIG -> IbvEventType.PATH_MIG;
            case Eq.EVENT_COMM_EST -> IbvEventType.COMM_EST;
            case Eq.EVENT_SQ_DRAINED -> IbvEventType.SQ_DRAINED;
            case Eq.EVENT_SRQ_LAST_WQE -> IbvEventType.QP_LAST_WQE_REACHED;
            case Eq.EVENT_WQ_CATAS_ERROR -> IbvEventType.QP_FATAL;
            case Eq.EVENT_PATH_MIG_FAILED -> IbvEventType.PATH_MIG_ERR;
            case Eq.EVENT_WQ_INVAL_REQ_ERROR -> IbvEventType.QP_REQ_ERR;
            case Eq.EVENT_WQ_ACCESS_ERROR -> IbvEventType.QP_ACCESS_ERR;
            default -> null;
        };
    }

    /** {@code mlx5_ib_query_qp}'s state: {@code QUERY_QP}'s {@code qpc.state}. */
    static IbvQpState queryState(Mlx5IbDev dev, int qpn) {
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.QUERY_QP, 0, 16);
        Pages.INDEX24.set(in, 0, qpn);
        MemorySegment out = dev.cmd(() -> dev.core.exec(in, Qp.QUERY_OUT_LEN));
        return switch (Qp.QPC_STATE.get(out, Qp.QUERY_OUT_QPC)) {
            case Qp.STATE_RST -> IbvQpState.RESET;
            case Qp.STATE_INIT -> IbvQpState.INIT;
            case Qp.STATE_RTR -> IbvQpState.RTR;
            case Qp.STATE_RTS -> IbvQpState.RTS;
            case Qp.STATE_SQER -> IbvQpState.SQE;
            case Qp.STATE_SQD -> IbvQpState.SQD;
            default -> IbvQpState.ERR;
        };
    }

    /** {@code mlx5_ib_modify_qp} ({@code __mlx5_ib_modify_qp}): the transition's command with the QPC the attributes give. */
    static void modifyQp(Mlx5IbDev dev, int qpn, IbvQpAttr cur, IbvQpAttr a, int mask, IbvQpState from, IbvQpState to) {
        int opcode;
        if (to == IbvQpState.ERR) {
            opcode = Qp.QP_2ERR;
        } else if (to == IbvQpState.RESET) {
            opcode = Qp.QP_2RST;
        } else {
            opcode = switch (from.name() + ">" + to.name()) {
                case "RESET>INIT" -> Qp.RST2INIT_QP;
                case "INIT>INIT" -> Qp.INIT2INIT_QP;
                case "INIT>RTR" -> Qp.INIT2RTR_QP;
                case "RTR>RTS" -> Qp.RTR2RTS_QP;
                case "RTS>RTS" -> Qp.RTS2RTS_QP;
                case "SQE>RTS" -> Qp.SQERR2RTS_QP;
                default -> throw new KernelException(Errno.EINVAL, String.format("%s: QP 0x%x: no transition from %s to %s on mlx5",
                        dev.name(), qpn, from, to));
            };
        }
        boolean full = opcode != Qp.QP_2ERR && opcode != Qp.QP_2RST;
        MemorySegment in = Mlx5CoreDev.input(opcode, 0, full ? Qp.MODIFY_IN_LEN : 16);
        Pages.INDEX24.set(in, 0, qpn);
        if (full) {
            setQpc(in, Qp.IN_QPC, cur, a, mask);
        }
        dev.cmd(() -> dev.core.exec(in, 16));
    }

    /**
     * The QPC of a transition: each field from {@code a} where {@code mask} names it, else from
     * {@code cur} (the attributes set so far); the path as {@code mlx5_set_path} writes it.
     */
    private static void setQpc(MemorySegment in, long c, IbvQpAttr cur, IbvQpAttr a, int mask) {
        int port = (mask & IbvQpAttr.PORT) != 0 ? a.portNum : cur.portNum;
        int access = (mask & IbvQpAttr.ACCESS_FLAGS) != 0 ? a.qpAccessFlags : cur.qpAccessFlags;
        Qp.QPC_PRI_VHCA_PORT_NUM.set(in, c, port);
        Qp.QPC_PRI_PKEY_INDEX.set(in, c, (mask & IbvQpAttr.PKEY_INDEX) != 0 ? a.pkeyIndex : cur.pkeyIndex);
        Qp.QPC_Q_KEY.set(in, c, (mask & IbvQpAttr.QKEY) != 0 ? a.qkey : cur.qkey);
        Qp.QPC_RRE.set(in, c, (access & IbAccess.REMOTE_READ) != 0 ? 1 : 0);
        Qp.QPC_RWE.set(in, c, (access & IbAccess.REMOTE_WRITE) != 0 ? 1 : 0);
        Qp.QPC_RAE.set(in, c, (access & IbAccess.REMOTE_ATOMIC) != 0 ? 1 : 0);
        Qp.QPC_FLUSH_GLOBAL.set(in, c, (access & IbAccess.FLUSH_GLOBAL) != 0 ? 1 : 0);
        Qp.QPC_FLUSH_PERSISTENT.set(in, c, (access & IbAccess.FLUSH_PERSISTENT) != 0 ? 1 : 0);
        Qp.QPC_MTU.set(in, c, (mask & IbvQpAttr.PATH_MTU) != 0 ? a.pathMtu : cur.pathMtu);
        Qp.QPC_REMOTE_QPN.set(in, c, (mask & IbvQpAttr.DEST_QPN) != 0 ? a.destQpNum : cur.destQpNum);
        IbvQpAttr av = (mask & IbvQpAttr.AV) != 0 ? a : cur;
        Qp.QPC_PRI_RLID.set(in, c, av.dlid);
        if (av.isGlobal) { // mlx5_set_path: the GRH, the source GID index, the hop limit and the remote GID
            Qp.QPC_PRI_GRH.set(in, c, 1);
            Qp.QPC_PRI_SRC_ADDR_INDEX.set(in, c, av.sgidIndex);
            Qp.QPC_PRI_HOP_LIMIT.set(in, c, av.hopLimit);
            MemorySegment.copy(av.dgid, 0, in, ValueLayout.JAVA_BYTE, c + Qp.QPC_PRI_RGID, 16);
        }
        Qp.QPC_NEXT_RCV_PSN.set(in, c, (mask & IbvQpAttr.RQ_PSN) != 0 ? a.rqPsn : cur.rqPsn);
        Qp.QPC_NEXT_SEND_PSN.set(in, c, (mask & IbvQpAttr.SQ_PSN) != 0 ? a.sqPsn : cur.sqPsn);
        Qp.QPC_MIN_RNR_NAK.set(in, c, (mask & IbvQpAttr.MIN_RNR_TIMER) != 0 ? a.minRnrTimer : cur.minRnrTimer);
        Qp.QPC_LOG_RRA_MAX.set(in, c, log2((mask & IbvQpAttr.MAX_DEST_RD_ATOMIC) != 0 ? a.maxDestRdAtomic : cur.maxDestRdAtomic));
        Qp.QPC_LOG_SRA_MAX.set(in, c, log2((mask & IbvQpAttr.MAX_QP_RD_ATOMIC) != 0 ? a.maxRdAtomic : cur.maxRdAtomic));
        Qp.QPC_RETRY_COUNT.set(in, c, (mask & IbvQpAttr.RETRY_CNT) != 0 ? a.retryCnt : cur.retryCnt);
        Qp.QPC_RNR_RETRY.set(in, c, (mask & IbvQpAttr.RNR_RETRY) != 0 ? a.rnrRetry : cur.rnrRetry);
        Qp.QPC_PRI_ACK_TIMEOUT.set(in, c, (mask & IbvQpAttr.TIMEOUT) != 0 ? a.timeout : cur.timeout);
    }

    private static int log2(int n) {
        return 31 - Integer.numberOfLeadingZeros(Math.max(1, n));
    }
}
