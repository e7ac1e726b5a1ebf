package org.peerdirect.mlx5.lib;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * libmlx5's QP ({@code struct mlx5_qp} of {@code providers/mlx5/qp.c}): the state the library
 * keeps, modify/query/destroy through the driver ({@link Control}), {@code mlx5_post_recv}, and
 * the send queue with {@code _mlx5_post_send} in {@link Mlx5Sq}. The buffer holds the receive
 * queue first and the send queue after it. Receive WQEs are data segments ended by an
 * {@code INVALID_LKEY} segment; the receive doorbell record is all the device is told.
 *
 * <p>Lock rules: {@link #rqLock} guards the receive ring's head and wrids (the send queue's lock
 * is {@link Mlx5Sq}'s). The tails move on the poller's thread under the CQ's lock, each a
 * volatile counter written by that one thread. No lock is shared with another QP and nothing is
 * allocated per request.
 */
public final class Mlx5Qp implements IbQpOps {

    /** What the driver does for a QP beyond the data path. */
    public interface Control {
        /**
         * {@code mlx5_ib_modify_qp}: the transition command; returns when the hardware took it.
         * {@code cur} holds the attributes set so far (called under the QP's monitor).
         */
        void modify(Mlx5Qp qp, IbvQpAttr cur, IbvQpAttr attr, int mask, IbvQpState from, IbvQpState to);

        /** {@code mlx5_ib_query_qp}'s state: the hardware's ({@code QUERY_QP}), which moves to ERR without the library's knowledge. */
        IbvQpState queryState(Mlx5Qp qp);

        void destroy(Mlx5Qp qp);
    }

    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    public final int qpn;
    private final IbvQpType type;
    private final UserBuf buf;
    private final Control control;
    private final int rqWqes;
    private final int rqStride;
    private final int maxRecvSge;
    /** The send queue and its BlueFlame register. */
    private final Mlx5Sq sq;
    private final ReentrantLock rqLock = new ReentrantLock();
    /** Guarded by rqLock. */
    private int rqHead;
    private volatile int rqTail;
    private final long[] rqWrid;
    private volatile IbvQpState state = IbvQpState.RESET;
    private final IbvQpAttr attr = new IbvQpAttr();
    private final Mlx5Cq sendCq;
    private final Mlx5Cq recvCq;
    /** The SRQ its receives come from, or null (then the QP's own receive queue). */
    private final Mlx5Srq srq;

    /**
     * A QP over {@code buf} (the receive queue, then the send queue) with {@code 2^logSq} send
     * basic blocks and {@code 2^logRq} receive WQEs of {@code rqStride} bytes ({@code logRq} -1:
     * none); {@code sqSigAll} is {@code ibv_qp_init_attr.sq_sig_all} ({@code sq_signal_bits}).
     */
    public Mlx5Qp(int qpn, IbvQpType type, UserBuf buf, UarPage uar, int bfSize, int logSq, int logRq, int rqStride, int maxSendSge,
            int maxRecvSge, int maxInline, boolean sqSigAll, Mlx5Cq sendCq, Mlx5Cq recvCq, Mlx5Srq srq, Control control) {
        this.qpn = qpn;
        this.srq = srq;
        this.sendCq = sendCq;
        this.recvCq = recvCq;
        this.type = type;
        this.buf = buf;
        this.control = control;
        this.rqWqes = logRq < 0 ? 0 : 1 << logRq;
        this.rqStride = rqStride;
        this.maxRecvSge = maxRecvSge;
        this.rqWrid = new long[Math.max(1, rqWqes)];
        this.sq = new Mlx5Sq(this, type, buf, uar, bfSize, logSq, (long) rqWqes * rqStride, maxSendSge, maxInline, sqSigAll);
    }

    /**
     * libmlx5's switch: with {@code MLX5_SHUT_UP_BF} set (and not "0") in the environment, or as a
     * system property of that name, a post only rings the doorbell; by default a single request
     * that fits the BlueFlame buffer goes whole into the BlueFlame register ({@code
     * MLX5_POST_SEND_PREFER_BF} defaults to on, so inline or not). Read when a QP is created.
     */
    public static final String SHUT_UP_BF = "MLX5_SHUT_UP_BF";

    static boolean shutUpBf() {
        String v = System.getenv(SHUT_UP_BF);
        if (v == null) {
            v = System.getProperty(SHUT_UP_BF);
        }
        return v != null && !v.equals("0");
    }

    /**
     * The queue sizes {@code mlx5_ib} computes: the WQE size for the largest request (control +
     * remote or datagram segment + the data or inline part, in basic blocks), times the requests,
     * rounded to powers of two. Returns {log_sq_size, log_rq_size, log_rq_stride (16-byte units)}.
     */
    public static int[] geometry(IbvQpType type, int maxSendWr, int maxSendSge, int maxInline, int maxRecvWr, int maxRecvSge) {
        // ctrl + (av | [xrc] + raddr + atomic)
        int head = 16 + (type == IbvQpType.UD ? Qp.AV_SIZE : 32) + (type == IbvQpType.XRC_SEND ? Qp.XRC_SEG_SIZE : 0);
        int data = Math.max(16 * maxSendSge, (4 + maxInline + 15) & ~15);
        int bbsPerWqe = (head + data + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
        int logSq = 32 - Integer.numberOfLeadingZeros(Math.max(1, maxSendWr * bbsPerWqe) - 1);
        int strideDs = Integer.highestOneBit(Math.max(1, maxRecvSge + 1) * 2 - 1); // room for the INVALID_LKEY end
        int logStride = Integer.numberOfTrailingZeros(strideDs);
        int logRq = maxRecvWr == 0 ? -1 : 32 - Integer.numberOfLeadingZeros(Math.max(1, maxRecvWr) - 1);
        return new int[] { logSq, logRq, logStride };
    }

    @Override
    public int qpNum() {
        return qpn;
    }

    @Override
    public IbvQpState state() {
        return state;
    }

    /** An error CQE of this QP: the hardware moved it to ERR. */
    void sawError() {
        state = IbvQpState.ERR;
    }

    @Override
    public synchronized void modifyQp(IbvQpAttr a, int mask) {
        IbvQpState to = (mask & IbvQpAttr.STATE) != 0 ? a.qpState : state;
        control.modify(this, attr, a, mask, state, to);
        if (to == IbvQpState.RESET) {
            sq.lock.lock();
            rqLock.lock();
            try { // the hardware's counters restart: so do ours (mlx5_ib's reset of the WQs)
                sq.reset();
                rqHead = 0;
                rqTail = 0;
                buf.dbr().set(BE64, 0, 0);
            } finally {
                rqLock.unlock();
                sq.lock.unlock();
            }
        }
        remember(attr, a, mask);
        state = to;
    }

    /** The attributes {@code m} names, from {@code a} into {@code attr} (what a later modify or query reads). */
    public static void remember(IbvQpAttr attr, IbvQpAttr a, int m) {
        if ((m & IbvQpAttr.PORT) != 0) attr.portNum = a.portNum;
        if ((m & IbvQpAttr.PATH_MTU) != 0) attr.pathMtu = a.pathMtu;
        if ((m & IbvQpAttr.PKEY_INDEX) != 0) attr.pkeyIndex = a.pkeyIndex;
        if ((m & IbvQpAttr.QKEY) != 0) attr.qkey = a.qkey;
        if ((m & IbvQpAttr.AV) != 0) {
            attr.dlid = a.dlid;
            attr.isGlobal = a.isGlobal;
            attr.dgid = a.dgid.clone();
            attr.sgidIndex = a.sgidIndex;
            attr.hopLimit = a.hopLimit;
        }
        if ((m & IbvQpAttr.DEST_QPN) != 0) attr.destQpNum = a.destQpNum;
        if ((m & IbvQpAttr.RQ_PSN) != 0) attr.rqPsn = a.rqPsn & 0xff_ffff;
        if ((m & IbvQpAttr.SQ_PSN) != 0) attr.sqPsn = a.sqPsn & 0xff_ffff;
        if ((m & IbvQpAttr.ACCESS_FLAGS) != 0) attr.qpAccessFlags = a.qpAccessFlags;
        if ((m & IbvQpAttr.MAX_QP_RD_ATOMIC) != 0) attr.maxRdAtomic = a.maxRdAtomic;
        if ((m & IbvQpAttr.MAX_DEST_RD_ATOMIC) != 0) attr.maxDestRdAtomic = a.maxDestRdAtomic;
        if ((m & IbvQpAttr.MIN_RNR_TIMER) != 0) attr.minRnrTimer = a.minRnrTimer;
        if ((m & IbvQpAttr.TIMEOUT) != 0) attr.timeout = a.timeout;
        if ((m & IbvQpAttr.RETRY_CNT) != 0) attr.retryCnt = a.retryCnt;
        if ((m & IbvQpAttr.RNR_RETRY) != 0) attr.rnrRetry = a.rnrRetry;
    }

    /**
     * {@code mlx5_query_qp} → {@code ibv_cmd_query_qp}: the state from the hardware (a responder's
     * error moves the QP to ERR with no CQE the library sees), remembered as libibverbs does
     * ({@code qp->state = attr->qp_state}); the other attributes as set.
     */
    @Override
    public synchronized IbvQpAttr queryQp() {
        state = control.queryState(this);
        IbvQpAttr a = attr.copy();
        a.qpState = state;
        return a;
    }

    // ------------------------------------------------------------------ post send

    /** libmlx5's {@code _mlx5_post_send}, on the send queue ({@link Mlx5Sq}). */
    @Override
    public void postSend(IbvSendWr wr) {
        sq.postSend(wr);
    }

    /** The poller saw the CQE of the WQE at basic block {@code counter}: it and every WQE before it are done. */
    long sendCompleted(int counter) {
        return sq.completed(counter);
    }

    // ------------------------------------------------------------------ post receive

    @Override
    public void postRecv(IbvRecvWr wr) {
        if (rqWqes == 0) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x has no receive queue", qpn), wr);
        }
        if (state == IbvQpState.RESET) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x is in RESET: ibv_post_recv needs INIT or later", qpn), wr);
        }
        int posted = 0;
        rqLock.lock();
        try {
            for (IbvRecvWr w = wr; w != null; w = w.next) {
                if (w.numSge < 0 || w.numSge > maxRecvSge || w.numSge > w.sgList.length) {
                    throw new PostException(Errno.EINVAL, String.format("QP 0x%x: receive request %d has %d SGEs, max %d", qpn, w.wrId,
                            w.numSge, maxRecvSge), w);
                }
                if ((rqHead - rqTail & 0xffff) >= rqWqes) {
                    throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: receive queue full (%d requests)", qpn, rqWqes), w);
                }
                long off = (long) (rqHead & rqWqes - 1) * rqStride;
                recvSegments(buf.page(off), off & 4095, w, rqStride / Qp.DS_SIZE);
                rqWrid[rqHead & rqWqes - 1] = w.wrId;
                rqHead = rqHead + 1 & 0xffff;
                posted++;
            }
        } finally {
            if (posted > 0) {
                VarHandle.releaseFence();
                buf.dbr().set(BE32, Qp.DBR_RCV, rqHead & 0xffff);
            }
            rqLock.unlock();
        }
    }

    /**
     * The reset flow's part of this QP ({@code mlx5_ib_handle_internal_error}): the QP is in ERR
     * and its CQs complete its outstanding work in software from now on.
     */
    public void internalError() {
        state = IbvQpState.ERR;
        sendCq.internalError(this, true);
        if (rqWqes > 0) {
            recvCq.internalError(this, false);
        }
    }

    /** {@code sw_comp} of the send queue, under the CQ's lock: WR_FLUSH_ERR for each outstanding WQE into {@code wc[k..max)}. */
    int flushSend(IbvWc[] wc, int k, int max) {
        return sq.flush(wc, k, max);
    }

    /** {@code sw_comp} of the receive queue. */
    int flushRecv(IbvWc[] wc, int k, int max) {
        rqLock.lock();
        try {
            while (k < max && rqTail != rqHead) {
                flushed(wc[k++], IbvWcOpcode.RECV, rqWrid[rqTail & rqWqes - 1], qpn);
                rqTail = rqTail + 1 & 0xffff;
            }
            return k;
        } finally {
            rqLock.unlock();
        }
    }

    static void flushed(IbvWc w, IbvWcOpcode opcode, long wrId, int qpn) {
        w.status = IbvWcStatus.WR_FLUSH_ERR;
        w.vendorErr = Cq.SYND_WR_FLUSH;
        w.opcode = opcode;
        w.wrId = wrId;
        w.qpNum = qpn;
        w.byteLen = 0;
        w.wcFlags = 0;
        w.immData = 0;
    }

    /**
     * A receive WQE's data segments at byte {@code o} of page {@code p}, closed by an INVALID_LKEY
     * segment when fewer than {@code slots} are used (the QP's receive WQEs and the SRQ's after its
     * next segment have the same shape).
     */
    static void recvSegments(MemorySegment p, long o, IbvRecvWr w, int slots) {
        int i = 0;
        for (; i < w.numSge; i++) {
            p.set(BE32, o + i * 16L + Qp.DATA_BYTE_COUNT, w.sgList[i].length);
            p.set(BE32, o + i * 16L + Qp.DATA_LKEY, w.sgList[i].lkey);
            p.set(BE64, o + i * 16L + Qp.DATA_ADDR, w.sgList[i].addr);
        }
        if (i < slots) {
            p.set(BE32, o + i * 16L + Qp.DATA_BYTE_COUNT, 0);
            p.set(BE32, o + i * 16L + Qp.DATA_LKEY, Qp.INVALID_LKEY);
            p.set(BE64, o + i * 16L + Qp.DATA_ADDR, 0);
        }
    }

    /** The poller saw the receive CQE of WQE {@code counter} (receives complete in order). */
    long recvCompleted(int counter) {
        if (srq != null) { // the CQE's wqe_counter is the SRQ WQE's index
            return srq.completed(counter);
        }
        rqTail = counter + 1 & 0xffff;
        return rqWrid[counter & rqWqes - 1];
    }

    @Override
    public void destroyQp() {
        control.destroy(this);
    }

    @Override
    public String toString() {
        return String.format("mlx5 QP 0x%x (%s, %s)", qpn, type, state);
    }
}
