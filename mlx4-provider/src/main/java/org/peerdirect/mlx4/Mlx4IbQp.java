package org.peerdirect.mlx4;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.QpContext;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx4.core.Qp;
import org.peerdirect.mlx4.lib.Mlx4Qp;

/**
 * {@code struct mlx4_ib_qp} ({@code drivers/infiniband/hw/mlx4/qp.c}) over libmlx4's QP
 * ({@link Mlx4Qp}, the data path in the user's process): {@code mlx4_ib_create_qp} takes a QPN
 * from the driver's bitmap, the library's buffer (both queues and the receive doorbell record)
 * pinned with its MTT written ({@code ib_umem_get}, {@code mlx4_mtt_init},
 * {@code mlx4_ib_umem_write_mtt}); no command, the device learns of the QP at {@code RST2INIT_QP}
 * from the whole context ({@code __mlx4_ib_modify_qp}): PD, CQs, SRQ, the queues' sizes and
 * strides, MTT, doorbell record, UAR page, service type, path and transport attributes.
 * {@code mlx4_ib_destroy_qp} moves it to RESET ({@code 2RST_QP}, the device lets it go) and frees
 * the rest.
 *
 * <p>Lock rules: {@code this} guards {@link #path} and {@link #attr} (modify, query); the data path
 * is the library's; {@link #state} is volatile (the poller marks an error).
 */
final class Mlx4IbQp implements IbQpOps {

    /** The path and transport attributes the context carries (the values a QP starts with). */
    private static final class Path {
        int port = 1;
        int mtu = 5;
        int pkeyIndex;
        int qkey;
        int dlid;
        int remoteQpn;
        int rqPsn;
        int sqPsn;
        int remoteAccess;
        int sraMax = 1;
        int rraMax = 1;
        int minRnrTimer;
        int ackTimeout;
        int retryCount;
        int rnrRetry;

        Path copy() {
            Path p = new Path();
            p.port = port;
            p.mtu = mtu;
            p.pkeyIndex = pkeyIndex;
            p.qkey = qkey;
            p.dlid = dlid;
            p.remoteQpn = remoteQpn;
            p.rqPsn = rqPsn;
            p.sqPsn = sqPsn;
            p.remoteAccess = remoteAccess;
            p.sraMax = sraMax;
            p.rraMax = rraMax;
            p.minRnrTimer = minRnrTimer;
            p.ackTimeout = ackTimeout;
            p.retryCount = retryCount;
            p.rnrRetry = rnrRetry;
            return p;
        }
    }

    final Mlx4Pd pd;
    final int qpn;
    private final IbvQpType type;
    final Mlx4IbSrq srq;
    private final Mlx4Cq sendCq;
    private final Mlx4Cq recvCq;
    /** libmlx4's QP: the WQEs, the wrids, the doorbells. */
    final Mlx4Qp lib;
    private final Mlx4Context.Pinned buf;
    private final Mlx4Qp.Geometry geometry;
    private Path path = new Path();
    private final IbvQpAttr attr = new IbvQpAttr();
    /** The state the driver moved the QP to, or ERR once a CQE said the hardware did. */
    private volatile IbvQpState state = IbvQpState.RESET;
    /** The core's handler of this QP's asynchronous events. */
    final IbEvents events;

    private Mlx4IbQp(Mlx4Pd pd, int qpn, IbvQpType type, Mlx4IbSrq srq, Mlx4Cq sendCq, Mlx4Cq recvCq, Mlx4Qp lib, Mlx4Context.Pinned buf,
            Mlx4Qp.Geometry geometry, IbEvents events) {
        this.geometry = geometry;
        this.pd = pd;
        this.qpn = qpn;
        this.type = type;
        this.srq = srq;
        this.sendCq = sendCq;
        this.recvCq = recvCq;
        this.lib = lib;
        this.buf = buf;
        this.events = events;
    }

    /**
     * {@code mlx4_ib_create_qp} with libmlx4's {@code mlx4_create_qp}: the geometry, the buffer in
     * the process pinned and its MTT written, a QPN; the QP is in RESET and the device does not
     * know it yet.
     */
    static Mlx4IbQp create(Mlx4Pd pd, IbvQpInitAttr a, Mlx4Cq sendCq, Mlx4Cq recvCq, Mlx4IbSrq srq, IbEvents events) {
        Mlx4Device dev = pd.ctx.dev;
        IbvQpType type = a.qpType == IbvQpType.UD ? IbvQpType.UD : IbvQpType.RC;
        int maxRecvSge = Math.max(1, a.maxRecvSge);
        Mlx4Qp.Geometry g = Mlx4Qp.geometry(type, a.maxSendWr, a.maxSendSge, a.maxInlineData, a.maxRecvWr, maxRecvSge, srq != null);
        if (g.logSq() > 31 - Integer.numberOfLeadingZeros(dev.core.caps().maxQpSz()) || 1 << g.sqShift() > dev.core.caps().maxSqDescSz() * 2) {
            throw new KernelException(Errno.EINVAL, String.format("%s: a send queue of 2^%d WQEs of %d bytes exceeds the device", dev.name,
                    g.logSq(), 1 << g.sqShift()));
        }
        Mlx4Context.Pinned p = pd.ctx.pin(g.bytes());
        int qpn;
        try {
            qpn = dev.qpns.alloc();
        } catch (RuntimeException e) {
            p.release();
            throw e;
        }
        Mlx4Qp lib = new Mlx4Qp(qpn, type, p.buf(), pd.ctx.uar, g, a.maxSendSge, maxRecvSge, a.maxInlineData, a.sqSigAll);
        Mlx4IbQp qp = new Mlx4IbQp(pd, qpn, type, srq, sendCq, recvCq, lib, p, g, events);
        dev.qpTable[qpn] = qp;
        return qp;
    }

    @Override
    public int qpNum() {
        return qpn;
    }

    /**
     * The state: the one the driver set, unless the hardware may have moved the QP to ERR since
     * (a responder's error, a CQ overrun: no CQE the library sees), which {@code QUERY_QP} tells;
     * a device that is gone has every QP in ERR.
     */
    @Override
    public IbvQpState state() {
        IbvQpState s = state;
        if (s == IbvQpState.RESET || s == IbvQpState.ERR) {
            return s;
        }
        try {
            return hardwareState();
        } catch (RuntimeException gone) {
            return IbvQpState.ERR;
        }
    }

    /** An error CQE of this QP: the hardware moved it to ERR. */
    void sawError() {
        state = IbvQpState.ERR;
    }

    private IbvQpState hardwareState() {
        return Mlx4Status.state(Qp.query(pd.ctx.dev.core, qpn).get(BE32, QpContext.FLAGS) >>> 28);
    }

    /** The work-request id of the receive CQE of WQE {@code wqeIndex} (the SRQ's index with one). */
    long recvWrid(int wqeIndex) {
        return srq != null ? srq.lib.completed(wqeIndex) : lib.recvCompleted();
    }

    // ------------------------------------------------------------------ modify

    /** {@code mlx4_ib_modify_qp}'s {@code op[cur][next]}: the transition command, or -1. */
    private static int command(IbvQpState cur, IbvQpState next) {
        if (next == IbvQpState.ERR) {
            return Mlx4Cmd.TWO_ERR_QP;
        }
        if (next == IbvQpState.RESET) {
            return Mlx4Cmd.TWO_RST_QP;
        }
        return switch (cur) {
            case RESET -> next == IbvQpState.INIT ? Mlx4Cmd.RST2INIT_QP : -1;
            case INIT -> next == IbvQpState.INIT ? Mlx4Cmd.INIT2INIT_QP : next == IbvQpState.RTR ? Mlx4Cmd.INIT2RTR_QP : -1;
            case RTR -> next == IbvQpState.RTS ? Mlx4Cmd.RTR2RTS_QP : -1;
            case RTS -> next == IbvQpState.RTS ? Mlx4Cmd.RTS2RTS_QP : next == IbvQpState.SQD ? Mlx4Cmd.RTS2SQD_QP : -1;
            case SQD -> next == IbvQpState.SQD ? Mlx4Cmd.SQD2SQD_QP : next == IbvQpState.RTS ? Mlx4Cmd.SQD2RTS_QP : -1;
            case SQE -> next == IbvQpState.RTS ? Mlx4Cmd.SQERR2RTS_QP : -1;
            default -> -1;
        };
    }

    /**
     * {@code mlx4_ib_modify_qp}: the context from the attributes, then the transition command;
     * before RST2INIT the library's send WQEs are made software's ({@code mlx4_qp_init_sq_ownership}),
     * after a move to RESET its indices start again ({@code mlx4_init_qp_indices}).
     */
    @Override
    public synchronized void modifyQp(IbvQpAttr a, int mask) {
        IbvQpState cur = state();
        IbvQpState next = (mask & IbvQpAttr.STATE) != 0 ? a.qpState : cur;
        int op = command(cur, next);
        if (op < 0) {
            throw new KernelException(Errno.EINVAL, String.format("QP 0x%x: no transition from %s to %s", qpn, cur, next));
        }
        Path c = path.copy();
        if ((mask & IbvQpAttr.PORT) != 0) {
            pd.ctx.dev.checkPort(a.portNum); // mlx4_ib_modify_qp's port check
            c.port = a.portNum;
        }
        if ((mask & IbvQpAttr.PATH_MTU) != 0) {
            c.mtu = a.pathMtu;
        }
        if ((mask & IbvQpAttr.PKEY_INDEX) != 0) {
            c.pkeyIndex = a.pkeyIndex;
        }
        if ((mask & IbvQpAttr.QKEY) != 0) {
            c.qkey = a.qkey;
        }
        if ((mask & IbvQpAttr.AV) != 0) {
            c.dlid = a.dlid;
        }
        if ((mask & IbvQpAttr.DEST_QPN) != 0) {
            c.remoteQpn = a.destQpNum;
        }
        if ((mask & IbvQpAttr.RQ_PSN) != 0) {
            c.rqPsn = a.rqPsn;
        }
        if ((mask & IbvQpAttr.SQ_PSN) != 0) {
            c.sqPsn = a.sqPsn;
        }
        if ((mask & IbvQpAttr.ACCESS_FLAGS) != 0) {
            c.remoteAccess = ((a.qpAccessFlags & IbAccess.REMOTE_READ) != 0 ? QpContext.PARAMS2_RRE : 0)
                    | ((a.qpAccessFlags & IbAccess.REMOTE_WRITE) != 0 ? QpContext.PARAMS2_RWE : 0)
                    | ((a.qpAccessFlags & IbAccess.REMOTE_ATOMIC) != 0 ? QpContext.PARAMS2_RAE : 0);
        }
        if ((mask & IbvQpAttr.MAX_QP_RD_ATOMIC) != 0) {
            c.sraMax = a.maxRdAtomic;
        }
        if ((mask & IbvQpAttr.MAX_DEST_RD_ATOMIC) != 0) {
            c.rraMax = a.maxDestRdAtomic;
        }
        if ((mask & IbvQpAttr.MIN_RNR_TIMER) != 0) {
            c.minRnrTimer = a.minRnrTimer;
        }
        if ((mask & IbvQpAttr.TIMEOUT) != 0) {
            c.ackTimeout = a.timeout;
        }
        if ((mask & IbvQpAttr.RETRY_CNT) != 0) {
            c.retryCount = a.retryCnt;
        }
        if ((mask & IbvQpAttr.RNR_RETRY) != 0) {
            c.rnrRetry = a.rnrRetry;
        }
        if (cur == IbvQpState.RESET && next != IbvQpState.RESET) {
            lib.initSqOwnership(); // the device may fetch from the first command that gives it the context on
        }
        Qp.modify(pd.ctx.dev.core, qpn, op, mask, x -> context(x, c, next));
        // the command took it: remember what the user set
        if (next == IbvQpState.RESET && cur != IbvQpState.RESET) {
            // libmlx4's mlx4_modify_qp to RESET: no CQE of the old life may be polled as the new one's
            recvCq.clean(qpn, srq);
            if (sendCq != recvCq) {
                sendCq.clean(qpn, null);
            }
        }
        if (next == IbvQpState.RESET) {
            lib.resetIndices();
        }
        state = next;
        path = c;
        copyMasked(a, mask, c);
    }

    /** {@code __mlx4_ib_modify_qp}'s context: the whole of it, from what the QP has and the user set. */
    private void context(MemorySegment x, Path c, IbvQpState to) {
        long p = QpContext.PRI_PATH;
        Mlx4Qp.Geometry g = geometry;
        x.set(BE32, QpContext.FLAGS, Mlx4Status.mlx4State(to) << 28 | (type == IbvQpType.UD ? QpContext.ST_UD : QpContext.ST_RC) << 16);
        x.set(BE32, QpContext.PD, pd.pdn);
        x.set(U8, QpContext.MTU_MSGMAX, (byte) (c.mtu << 5 | 31));
        x.set(U8, QpContext.SQ_SIZE_STRIDE, (byte) (g.logSq() << 3 | g.sqShift() - 4));
        if (srq == null) {
            x.set(U8, QpContext.RQ_SIZE_STRIDE, (byte) (g.logRq() << 3 | g.rqShift() - 4));
            x.set(BE64, QpContext.DB_REC_ADDR, buf.dbDma());
        } else {
            x.set(BE32, QpContext.SRQN, QpContext.SRQN_USE_SRQ | srq.srqn);
        }
        x.set(BE32, QpContext.USR_PAGE, pd.ctx.uar.index);
        x.set(BE32, QpContext.LOCAL_QPN, qpn);
        x.set(BE32, QpContext.REMOTE_QPN, c.remoteQpn);
        x.set(BE32, QpContext.CQN_SEND, sendCq.cqn);
        x.set(BE32, QpContext.CQN_RECV, recvCq.cqn);
        long mtt = buf.mtt().addr();
        x.set(U8, QpContext.LOG_PAGE_SIZE, (byte) 0); // mtt.page_shift - MLX4_ICM_PAGE_SHIFT: 4 KiB pages
        x.set(U8, QpContext.MTT_BASE_ADDR_H, (byte) (mtt >>> 32));
        x.set(BE32, QpContext.MTT_BASE_ADDR_L, (int) mtt);
        x.set(U8, p + QpContext.PATH_SCHED_QUEUE, (byte) QpContext.schedQueue(c.port));
        x.set(U8, p + QpContext.PATH_PKEY_INDEX, (byte) c.pkeyIndex);
        x.set(BE16, p + QpContext.PATH_RLID, (short) c.dlid);
        x.set(U8, p + QpContext.PATH_ACKTO, (byte) (c.ackTimeout << 3));
        x.set(BE32, QpContext.PARAMS1, fls(c.sraMax - 1) << 21 | (c.retryCount & 7) << 16 | (c.rnrRetry & 7) << 13);
        x.set(BE32, QpContext.PARAMS2, fls(c.rraMax - 1) << 21 | c.remoteAccess & (QpContext.PARAMS2_RRE | QpContext.PARAMS2_RWE
                | QpContext.PARAMS2_RAE));
        x.set(BE32, QpContext.RNR_NEXTRECVPSN, (c.minRnrTimer & 0x1f) << 24 | c.rqPsn & 0xff_ffff);
        x.set(BE32, QpContext.NEXT_SEND_PSN, c.sqPsn & 0xff_ffff);
        x.set(BE32, QpContext.QKEY, c.qkey);
    }

    /** {@code fls}: the position of the highest set bit (0 for 0). */
    private static int fls(int v) {
        return v <= 0 ? 0 : Math.min(7, 32 - Integer.numberOfLeadingZeros(v));
    }

    private void copyMasked(IbvQpAttr a, int mask, Path n) {
        attr.portNum = n.port;
        attr.pathMtu = n.mtu;
        attr.pkeyIndex = n.pkeyIndex;
        attr.qkey = n.qkey;
        attr.dlid = n.dlid;
        attr.destQpNum = n.remoteQpn;
        attr.rqPsn = n.rqPsn & 0xFFFFFF;
        attr.sqPsn = n.sqPsn & 0xFFFFFF;
        if ((mask & IbvQpAttr.ACCESS_FLAGS) != 0) {
            attr.qpAccessFlags = a.qpAccessFlags;
        }
        attr.maxRdAtomic = n.sraMax;
        attr.maxDestRdAtomic = n.rraMax;
        attr.minRnrTimer = n.minRnrTimer;
        attr.timeout = n.ackTimeout;
        attr.retryCnt = n.retryCount;
        attr.rnrRetry = n.rnrRetry;
    }

    /** {@code mlx4_ib_query_qp}: the attributes the user set, the state as QUERY_QP reads it from the device. */
    @Override
    public synchronized IbvQpAttr queryQp() {
        IbvQpAttr a = attr.copy();
        a.qpState = hardwareState();
        return a;
    }

    // ------------------------------------------------------------------ post

    /** {@code mlx4_post_send} (libmlx4); a QP before RTS is refused here, as the core's uverbs would find it useless. */
    @Override
    public void postSend(IbvSendWr wr) {
        IbvQpState st = state;
        if (st == IbvQpState.RESET || st == IbvQpState.INIT || st == IbvQpState.RTR) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x is in %s: ibv_post_send needs RTS", qpn, st), wr);
        }
        lib.postSend(wr);
    }

    @Override
    public void postRecv(IbvRecvWr wr) {
        if (srq != null) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x uses an SRQ: post to the SRQ", qpn), wr);
        }
        if (state == IbvQpState.RESET) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x is in RESET: ibv_post_recv needs INIT or later", qpn), wr);
        }
        lib.postRecv(wr);
    }

    /**
     * {@code mlx4_ib_destroy_qp}: {@code 2RST_QP} unless in RESET (the device lets the QP go and
     * waits until no WQE of it executes), out of the table, the buffer's MTT, pin and memory back,
     * the QPN free. On a device that is gone the command's failure is only logged.
     */
    @Override
    public void destroyQp() {
        Mlx4Device dev = pd.ctx.dev;
        if (state != IbvQpState.RESET) {
            dev.hw2sw(0, qpn, Mlx4Cmd.TWO_RST_QP);
        }
        if (dev.qpTable[qpn] == this) {
            dev.qpTable[qpn] = null;
        }
        buf.release();
        dev.qpns.free(qpn);
    }

    @Override
    public String toString() {
        return lib + " " + state;
    }
}
