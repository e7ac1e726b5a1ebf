package org.peerdirect.mlx4;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.engine.HwQp;
import org.peerdirect.hca.engine.HwQpState;
import org.peerdirect.hca.engine.QpCommand;
import org.peerdirect.hca.engine.QpContext;
import org.peerdirect.hca.engine.RecvQueue;
import org.peerdirect.hca.engine.SendWqe;
import org.peerdirect.hca.engine.Wqe;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx4.core.Qp;

/**
 * {@code struct mlx4_ib_qp} with libmlx4's data path: {@code mlx4_post_send} builds send WQEs in
 * the hardware's slots (control, remote-address, atomic, datagram, data or inline segments) and
 * rings the doorbell; {@code mlx4_post_recv} builds receive WQEs; {@code mlx4_ib_modify_qp}
 * turns verbs attributes into a QP context and a transition command. The wrid arrays map WQE
 * indices back to work-request ids.
 *
 * <p>Lock rules: {@link #sqLock} (libmlx4's {@code sq.lock}) guards {@link #sqTail} and the send
 * slots between the hardware's consumer index and the tail; the
 * receive queue is a {@link Mlx4RecvRing}; {@code this} guards {@link #ctx} and {@link #attr} (modify, query).
 */
final class Mlx4Qp implements IbQpOps {

    final Mlx4Pd pd;
    final HwQp hw;
    final int qpn;
    private final IbvQpType type;
    private final Mlx4Srq srq;
    private final AddressSpace owner;
    final long[] sqWrid;
    /** sqWrid.length - 1 (the hardware's queue sizes are powers of two). */
    final int sqMask;
    /** The own receive queue, or null with an SRQ. */
    private final Mlx4RecvRing rq;
    private final ReentrantLock sqLock = new ReentrantLock();
    private long sqTail;
    private final QpContext ctx = new QpContext();
    private final IbvQpAttr attr = new IbvQpAttr();

    /** BAR2 offset of the send doorbell on the driver's UAR page. */
    private final long sendDoorbell;

    /** The core's handler of this QP's asynchronous events. */
    final IbEvents events;

    Mlx4Qp(Mlx4Pd pd, HwQp hw, IbvQpType type, Mlx4Srq srq, IbEvents events) {
        this.pd = pd;
        this.events = events;
        this.hw = hw;
        this.qpn = hw.qpn;
        this.type = type;
        this.srq = srq;
        this.owner = pd.ctx.process;
        this.sendDoorbell = pd.ctx.dev.uarPage() * (long) org.peerdirect.hca.cx3.ifc.Uar.PAGE_SIZE + org.peerdirect.hca.cx3.ifc.Uar.SEND_DOORBELL;
        this.sqWrid = new long[hw.sqSize()];
        this.sqMask = sqWrid.length - 1;
        RecvQueue q = hw.recvQueue();
        this.rq = q == null ? null : new Mlx4RecvRing(q, hw::rqDoorbell, String.format("QP 0x%x", qpn));
    }

    @Override
    public int qpNum() {
        return qpn;
    }

    @Override
    public IbvQpState state() {
        return Mlx4Status.state(hw.state());
    }

    long recvWrid(long wqeIndex) {
        return srq != null ? srq.ring.wrid(wqeIndex) : rq.wrid(wqeIndex);
    }

    // ------------------------------------------------------------------ modify

    /** {@code mlx4_ib_modify_qp}: the context from the attributes, then the transition command. */
    @Override
    public synchronized void modifyQp(IbvQpAttr a, int mask) {
        HwQpState cur = hw.state();
        HwQpState next = (mask & IbvQpAttr.STATE) != 0 ? Mlx4Status.hw(a.qpState) : cur;
        QpCommand cmd = QpCommand.between(cur, next);
        if (cmd == null) {
            throw new org.peerdirect.kernel.mm.KernelException(Errno.EINVAL, String.format("QP 0x%x: no transition from %s to %s",
                    qpn, Mlx4Status.state(cur), Mlx4Status.state(next)));
        }
        QpContext c = ctx.copy();
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
            c.remoteAccess = ((a.qpAccessFlags & IbAccess.REMOTE_READ) != 0 ? QpContext.BIT_RRE : 0)
                    | ((a.qpAccessFlags & IbAccess.REMOTE_WRITE) != 0 ? QpContext.BIT_RWE : 0)
                    | ((a.qpAccessFlags & IbAccess.REMOTE_ATOMIC) != 0 ? QpContext.BIT_RAE : 0);
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
        Qp.modify(pd.ctx.dev.core, qpn, cmd.opcode, mask, x -> context(x, c, next));
        // the command took it: remember what the user set
        copyMasked(a, mask, c);
    }

    /** {@code __mlx4_ib_modify_qp}'s context: the whole of it from what the QP has and the user set. */
    private void context(MemorySegment x, QpContext c, HwQpState to) {
        long p = org.peerdirect.hca.cx3.ifc.QpContext.PRI_PATH;
        x.set(BE32, org.peerdirect.hca.cx3.ifc.QpContext.FLAGS, mlx4State(to) << 28 | (type == IbvQpType.UD ? org.peerdirect.hca.cx3.ifc.QpContext.ST_UD : org.peerdirect.hca.cx3.ifc.QpContext.ST_RC) << 16);
        x.set(BE32, org.peerdirect.hca.cx3.ifc.QpContext.PD, pd.pdn);
        x.set(U8, org.peerdirect.hca.cx3.ifc.QpContext.MTU_MSGMAX, (byte) (c.mtu << 5 | 31));
        x.set(BE32, org.peerdirect.hca.cx3.ifc.QpContext.LOCAL_QPN, qpn);
        x.set(BE32, org.peerdirect.hca.cx3.ifc.QpContext.REMOTE_QPN, c.remoteQpn);
        x.set(U8, p + org.peerdirect.hca.cx3.ifc.QpContext.PATH_SCHED_QUEUE, (byte) org.peerdirect.hca.cx3.ifc.QpContext.schedQueue(c.port));
        x.set(U8, p + org.peerdirect.hca.cx3.ifc.QpContext.PATH_PKEY_INDEX, (byte) c.pkeyIndex);
        x.set(BE16, p + org.peerdirect.hca.cx3.ifc.QpContext.PATH_RLID, (short) c.dlid);
        x.set(U8, p + org.peerdirect.hca.cx3.ifc.QpContext.PATH_ACKTO, (byte) (c.ackTimeout << 3));
        x.set(BE32, org.peerdirect.hca.cx3.ifc.QpContext.PARAMS1, fls(c.sraMax - 1) << 21 | (c.retryCount & 7) << 16 | (c.rnrRetry & 7) << 13);
        x.set(BE32, org.peerdirect.hca.cx3.ifc.QpContext.PARAMS2, fls(c.rraMax - 1) << 21 | c.remoteAccess & (org.peerdirect.hca.cx3.ifc.QpContext.PARAMS2_RRE | org.peerdirect.hca.cx3.ifc.QpContext.PARAMS2_RWE
                | org.peerdirect.hca.cx3.ifc.QpContext.PARAMS2_RAE));
        x.set(BE32, org.peerdirect.hca.cx3.ifc.QpContext.RNR_NEXTRECVPSN, (c.minRnrTimer & 0x1f) << 24 | c.rqPsn & 0xff_ffff);
        x.set(BE32, org.peerdirect.hca.cx3.ifc.QpContext.NEXT_SEND_PSN, c.sqPsn & 0xff_ffff);
        x.set(BE32, org.peerdirect.hca.cx3.ifc.QpContext.QKEY, c.qkey);
    }

    /** {@code to_mlx4_state}. */
    private static int mlx4State(HwQpState s) {
        return switch (s) {
            case RST -> org.peerdirect.hca.cx3.ifc.QpContext.STATE_RST;
            case INIT -> org.peerdirect.hca.cx3.ifc.QpContext.STATE_INIT;
            case RTR -> org.peerdirect.hca.cx3.ifc.QpContext.STATE_RTR;
            case RTS -> org.peerdirect.hca.cx3.ifc.QpContext.STATE_RTS;
            case SQER -> org.peerdirect.hca.cx3.ifc.QpContext.STATE_SQER;
            case SQD -> org.peerdirect.hca.cx3.ifc.QpContext.STATE_SQD;
            case ERR -> org.peerdirect.hca.cx3.ifc.QpContext.STATE_ERR;
        };
    }

    /** {@code fls}: the position of the highest set bit (0 for 0). */
    private static int fls(int v) {
        return v <= 0 ? 0 : Math.min(7, 32 - Integer.numberOfLeadingZeros(v));
    }

    private void copyMasked(IbvQpAttr a, int mask, QpContext n) {
        ctx.copyFrom(n);
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
        int st = Qp.query(pd.ctx.dev.core, qpn).get(BE32, org.peerdirect.hca.cx3.ifc.QpContext.FLAGS) >>> 28;
        a.qpState = switch (st) {
            case org.peerdirect.hca.cx3.ifc.QpContext.STATE_RST -> IbvQpState.RESET;
            case org.peerdirect.hca.cx3.ifc.QpContext.STATE_INIT -> IbvQpState.INIT;
            case org.peerdirect.hca.cx3.ifc.QpContext.STATE_RTR -> IbvQpState.RTR;
            case org.peerdirect.hca.cx3.ifc.QpContext.STATE_RTS -> IbvQpState.RTS;
            case org.peerdirect.hca.cx3.ifc.QpContext.STATE_SQER -> IbvQpState.SQE;
            case org.peerdirect.hca.cx3.ifc.QpContext.STATE_SQD -> IbvQpState.SQD;
            default -> IbvQpState.ERR;
        };
        return a;
    }

    // ------------------------------------------------------------------ post send

    private static int opcode(IbvWrOpcode op) {
        return switch (op) {
            case RDMA_WRITE -> Wqe.OP_RDMA_WRITE;
            case RDMA_WRITE_WITH_IMM -> Wqe.OP_RDMA_WRITE_IMM;
            case SEND -> Wqe.OP_SEND;
            case SEND_WITH_IMM -> Wqe.OP_SEND_IMM;
            case RDMA_READ -> Wqe.OP_RDMA_READ;
            case ATOMIC_CMP_AND_SWP -> Wqe.OP_ATOMIC_CS;
            case ATOMIC_FETCH_AND_ADD -> Wqe.OP_ATOMIC_FA;
            case ATOMIC_WRITE, FLUSH -> -1; // ConnectX-3 has no WQE for them: refused at post
        };
    }

    /**
     * {@code mlx4_post_send}: each request is checked and built into the next send slot; the
     * doorbell record is written under the lock and the doorbell rung after it, also for the
     * requests before a refused one (as on real hardware).
     */
    @Override
    public void postSend(IbvSendWr wr) {
        int queued = 0;
        sqLock.lock();
        try {
            for (IbvSendWr w = wr; w != null; w = w.next) {
                HwQpState st = hw.state();
                if (w.opcode == null) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has no opcode", qpn, w.wrId), w);
                }
                if (st == HwQpState.RST || st == HwQpState.INIT || st == HwQpState.RTR) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x is in %s: ibv_post_send needs RTS", qpn,
                            Mlx4Status.state(st)), w);
                }
                if (w.numSge < 0 || w.numSge > hw.maxSendSge() || w.numSge > w.sgList.length) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has %d SGEs, max_send_sge is %d",
                            qpn, w.wrId, w.numSge, hw.maxSendSge()), w);
                }
                if (type == IbvQpType.UD && w.opcode != IbvWrOpcode.SEND && w.opcode != IbvWrOpcode.SEND_WITH_IMM) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: %s is not valid on a UD QP", qpn, w.opcode), w);
                }
                if (type == IbvQpType.UD && w.ah == null) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: a UD send needs an address handle", qpn), w);
                }
                if (opcode(w.opcode) < 0) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: mlx4 has no %s (the device does not report it)", qpn,
                            w.opcode), w);
                }
                boolean inl = (w.sendFlags & IbvSendWr.SEND_INLINE) != 0;
                long total = w.totalLength();
                if (inl && (total > hw.maxInlineData() || w.opcode == IbvWrOpcode.RDMA_READ || w.opcode.isAtomic())) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: inline %s of %d bytes (max_inline_data %d)",
                            qpn, w.opcode, total, hw.maxInlineData()), w);
                }
                if (sqTail - hw.sqConsumerIndex() == hw.sqSize()) {
                    throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: send queue full (%d requests)", qpn, hw.sqSize()), w);
                }
                SendWqe q = hw.sqSlot(sqTail);
                q.opcode = opcode(w.opcode);
                q.ctrl = ((w.sendFlags & IbvSendWr.SEND_SIGNALED) != 0 ? Wqe.CTRL_CQ_UPDATE : 0)
                        | ((w.sendFlags & IbvSendWr.SEND_SOLICITED) != 0 ? Wqe.CTRL_SOLICITED : 0)
                        | ((w.sendFlags & IbvSendWr.SEND_FENCE) != 0 ? Wqe.CTRL_FENCE : 0) | (inl ? Wqe.CTRL_INLINE : 0);
                q.imm = w.immData;
                q.remoteAddr = w.remoteAddr;
                q.rkey = w.rkey;
                q.compareAdd = w.compareAdd;
                q.swap = w.swap;
                q.dlid = w.ah != null ? w.ah.dlid() : 0;
                q.grh = w.ah != null && w.ah.isGlobal(); // the UD AV's GRH bit (mlx4_set_path's grh)
                q.remoteQpn = w.remoteQpn;
                q.remoteQkey = w.remoteQkey;
                q.numSge = w.numSge;
                for (int i = 0; i < w.numSge; i++) {
                    q.addr[i] = w.sgList[i].addr;
                    q.byteCount[i] = w.sgList[i].length;
                    q.lkey[i] = w.sgList[i].lkey;
                }
                if (inl) {
                    // the CPU copies the data into the WQE now; the buffer may be reused at once
                    long off = 0;
                    for (int i = 0; i < w.numSge; i++) {
                        try {
                            owner.copyOut(w.sgList[i].addr, q.inline, off, w.sgList[i].length);
                        } catch (RuntimeException e) {
                            throw new PostException(Errno.EFAULT, String.format("QP 0x%x: inline data at 0x%x: %s", qpn, w.sgList[i].addr,
                                    e.getMessage()), w);
                        }
                        off += w.sgList[i].length;
                    }
                    q.inlineLen = (int) off;
                }
                q.length = total;
                sqWrid[(int) sqTail & sqMask] = w.wrId;
                sqTail++;
                queued++;
            }
        } finally {
            if (queued > 0) {
                hw.sqDoorbellRecord(sqTail);
            }
            sqLock.unlock();
            if (queued > 0) {
                // the UAR's send doorbell (libmlx4's doorbell_qpn, be32 qpn << 8), after the post lock
                pd.ctx.dev.core.fn.write32be(2, sendDoorbell, qpn << 8);
            }
        }
    }

    // ------------------------------------------------------------------ post receive

    @Override
    public void postRecv(IbvRecvWr wr) {
        if (srq != null) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x uses an SRQ: post to the SRQ", qpn), wr);
        }
        if (hw.state() == HwQpState.RST) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x is in RESET: ibv_post_recv needs INIT or later", qpn), wr);
        }
        rq.post(wr);
    }

    @Override
    public void destroyQp() {
        hw.destroy();
        Mlx4Device dev = pd.ctx.dev;
        if (dev.qpTable[qpn] == this) {
            dev.qpTable[qpn] = null;
        }
    }

    @Override
    public String toString() {
        return hw.toString();
    }
}
