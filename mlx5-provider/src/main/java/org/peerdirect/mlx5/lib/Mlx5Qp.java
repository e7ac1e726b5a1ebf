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
 * libmlx5's QP data path ({@code struct mlx5_qp}, {@code _mlx5_post_send}, {@code mlx5_post_recv}):
 * WQEs built as bytes in the process's queue buffer, the receive queue first and the send queue
 * after it. A send WQE is a control segment (opcode, WQE index, QPN, DS count, completion and
 * solicited flags, immediate), the remote-address and atomic segments or the UD address vector,
 * then data segments or one inline segment, in 64-byte basic blocks that wrap at the end of the
 * send queue. After a chain: the send doorbell record (BB counter), then the first 8 bytes of the
 * last control segment to a BlueFlame register of the context's UAR, alternating halves. Receive
 * WQEs are data segments ended by an {@code INVALID_LKEY} segment; the receive doorbell record is
 * all the device is told. Modify, query and destroy go to the driver ({@link Control}).
 *
 * <p>Lock rules: {@link #sqLock} (libmlx5's {@code sq.lock}) guards the send ring's head, wrids
 * and the BlueFlame offset; {@link #rqLock} the receive ring's head and wrids. The tails move on
 * the poller's thread under the CQ's lock, each a volatile counter written by that one thread.
 * No lock is shared with another QP and nothing is allocated per request.
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
    private static final ValueLayout.OfLong NATIVE64 = ValueLayout.JAVA_LONG_UNALIGNED;

    public final int qpn;
    private final IbvQpType type;
    private final UserBuf buf;
    private final UarPage uar;
    private final int bfSize;
    private final Control control;
    private final int sqBbs;
    private final long sqOffset;
    private final int rqWqes;
    private final int rqStride;
    private final int maxSendSge;
    private final int maxRecvSge;
    private final int maxInline;
    private final ReentrantLock sqLock = new ReentrantLock();
    private final ReentrantLock rqLock = new ReentrantLock();
    /** Guarded by sqLock: the next basic block to write. */
    private int sqHead;
    /** Basic blocks the device finished (the poller's, volatile for the poster). */
    private volatile int sqTail;
    /** BB index of a WQE's first block → the wr_id and the BB counter after the WQE. */
    private final long[] sqWrid;
    private final int[] sqNext;
    private int bfOffset;
    /**
     * The largest WQE in basic blocks that goes by BlueFlame ({@code buf_size}), 0 when BlueFlame
     * is off ({@value #SHUT_UP_BF}).
     */
    private final int bfMaxBbs;
    /** BlueFlame staging for a WQE that wraps the ring or crosses a page ({@code mlx5_bf_copy} gathers its blocks). Guarded by sqLock. */
    private final MemorySegment bfStage;
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

    public Mlx5Qp(int qpn, IbvQpType type, UserBuf buf, UarPage uar, int bfSize, int logSq, int logRq, int rqStride, int maxSendSge,
            int maxRecvSge, int maxInline, Mlx5Cq sendCq, Mlx5Cq recvCq, Mlx5Srq srq, Control control) {
        this.qpn = qpn;
        this.srq = srq;
        this.sendCq = sendCq;
        this.recvCq = recvCq;
        this.type = type;
        this.buf = buf;
        this.uar = uar;
        this.bfSize = bfSize;
        this.bfMaxBbs = shutUpBf() ? 0 : bfSize / Qp.SEND_WQE_BB;
        this.bfStage = MemorySegment.ofArray(new long[bfSize / 8]);
        this.control = control;
        this.sqBbs = 1 << logSq;
        this.rqWqes = logRq < 0 ? 0 : 1 << logRq;
        this.rqStride = rqStride;
        this.sqOffset = (long) rqWqes * rqStride;
        this.maxSendSge = maxSendSge;
        this.maxRecvSge = maxRecvSge;
        this.maxInline = maxInline;
        this.sqWrid = new long[sqBbs];
        this.sqNext = new int[sqBbs];
        this.rqWrid = new long[Math.max(1, rqWqes)];
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
            sqLock.lock();
            rqLock.lock();
            try { // the hardware's counters restart: so do ours (mlx5_ib's reset of the WQs)
                sqHead = 0;
                sqTail = 0;
                rqHead = 0;
                rqTail = 0;
                bfOffset = 0;
                buf.dbr().set(BE64, 0, 0);
            } finally {
                rqLock.unlock();
                sqLock.unlock();
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

    private static int opcode(IbvWrOpcode op) {
        return switch (op) {
            case RDMA_WRITE -> Wqe.OP_RDMA_WRITE;
            case RDMA_WRITE_WITH_IMM -> Wqe.OP_RDMA_WRITE_IMM;
            case SEND -> Wqe.OP_SEND;
            case SEND_WITH_IMM -> Wqe.OP_SEND_IMM;
            case RDMA_READ -> Wqe.OP_RDMA_READ;
            case ATOMIC_CMP_AND_SWP -> Wqe.OP_ATOMIC_CS;
            case ATOMIC_FETCH_AND_ADD -> Wqe.OP_ATOMIC_FA;
            case ATOMIC_WRITE -> Wqe.OP_ATOMIC_WRITE;
            case FLUSH -> Wqe.OP_FLUSH;
        };
    }

    /** The byte offset in the buffer of 16-byte segment {@code seg} of the WQE starting at basic block {@code bb}. */
    private long segOff(int bb, int seg) {
        return sqOffset + (long) ((bb + seg / 4) & sqBbs - 1) * Qp.SEND_WQE_BB + (seg & 3) * Qp.DS_SIZE;
    }

    /**
     * libmlx5's {@code _mlx5_post_send}: each request checked ({@link #checkSendWr}), its WQE
     * written from the producer's basic block on (control segment, then the XRC, datagram,
     * remote-address and atomic segments its type and opcode need, then the data), then one
     * doorbell for the chain, even when a later request is refused.
     */
    @Override
    public void postSend(IbvSendWr wr) {
        int posted = 0;
        int lastCtrlBb = 0;
        sqLock.lock();
        try {
            for (IbvSendWr w = wr; w != null; w = w.next) {
                checkSendWr(w);
                boolean xrc = type == IbvQpType.XRC_SEND;
                boolean inl = (w.sendFlags & IbvSendWr.SEND_INLINE) != 0;
                long total = w.totalLength();
                int op = opcode(w.opcode);
                int ds = 1 + (type == IbvQpType.UD ? Qp.AV_SIZE / Qp.DS_SIZE : 0) + (xrc ? 1 : 0)
                        + (op == Wqe.OP_SEND || op == Wqe.OP_SEND_IMM ? 0 : 1) + (Wqe.hasAtomicSegment(op) ? 1 : 0)
                        + (inl ? (int) ((4 + total + 15) / 16) : w.numSge);
                int bbs = (ds * Qp.DS_SIZE + Qp.SEND_WQE_BB - 1) / Qp.SEND_WQE_BB;
                if ((sqHead - sqTail & 0xffff) + bbs > sqBbs) {
                    throw new PostException(Errno.ENOMEM, String.format("QP 0x%x: send queue full (%d basic blocks)", qpn, sqBbs), w);
                }
                int bb = sqHead;
                setCtrlSeg(w, bb, op, ds);
                int seg = 1;
                if (xrc) { // _mlx5_post_send: the XRC segment right after the control segment, then as RC
                    long so = segOff(bb, seg);
                    MemorySegment xp = buf.page(so);
                    xp.set(BE32, (so & 4095) + Qp.XRC_SRQN, w.remoteSrqn);
                    xp.set(BE32, (so & 4095) + 4, 0);
                    xp.set(BE64, (so & 4095) + 8, 0);
                    seg++;
                }
                if (type == IbvQpType.UD) {
                    setDatagramSeg(w, bb, seg);
                    seg += 3;
                } else if (op != Wqe.OP_SEND && op != Wqe.OP_SEND_IMM) {
                    seg = setRaddrAtomicSegs(w, op, bb, seg);
                }
                if (inl) {
                    writeInline(w, bb, seg, (int) total);
                } else {
                    for (int i = 0; i < w.numSge; i++, seg++) { // set_data_ptr_seg
                        long so = segOff(bb, seg);
                        MemorySegment dp = buf.page(so);
                        dp.set(BE32, (so & 4095) + Qp.DATA_BYTE_COUNT, w.sgList[i].length);
                        dp.set(BE32, (so & 4095) + Qp.DATA_LKEY, w.sgList[i].lkey);
                        dp.set(BE64, (so & 4095) + Qp.DATA_ADDR, w.sgList[i].addr);
                    }
                }
                sqWrid[bb & sqBbs - 1] = w.wrId;
                sqNext[bb & sqBbs - 1] = bb + bbs & 0xffff;
                sqHead = bb + bbs & 0xffff;
                lastCtrlBb = bb;
                posted++;
            }
        } finally {
            if (posted > 0) {
                ringSend(lastCtrlBb, posted);
            }
            sqLock.unlock();
        }
    }

    /**
     * What {@code _mlx5_post_send} refuses before writing a WQE (EINVAL naming the problem): no
     * opcode, a QP not yet in RTS, too many SGEs, a UD request that is not a SEND with an address
     * handle, an ATOMIC WRITE or FLUSH off RC/XRC or with SGEs, a FLUSH with a bad type, level or
     * length, inline data that is too long or on an opcode that carries none. Caller holds the SQ lock.
     */
    private void checkSendWr(IbvSendWr w) {
        IbvQpState st = state;
        if (w.opcode == null) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has no opcode", qpn, w.wrId), w);
        }
        if (st == IbvQpState.RESET || st == IbvQpState.INIT || st == IbvQpState.RTR) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x is in %s: ibv_post_send needs RTS", qpn, st), w);
        }
        if (w.numSge < 0 || w.numSge > maxSendSge || w.numSge > w.sgList.length) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: send request %d has %d SGEs, max_send_sge is %d", qpn,
                    w.wrId, w.numSge, maxSendSge), w);
        }
        if (type == IbvQpType.UD && (w.opcode != IbvWrOpcode.SEND && w.opcode != IbvWrOpcode.SEND_WITH_IMM || w.ah == null)) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: a UD request must be a SEND with an address handle", qpn), w);
        }
        boolean noData = w.opcode == IbvWrOpcode.ATOMIC_WRITE || w.opcode == IbvWrOpcode.FLUSH;
        boolean xrc = type == IbvQpType.XRC_SEND;
        if (noData && (type != IbvQpType.RC && !xrc || w.numSge != 0)) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: %s %s (RC only, no SGE: %s)", qpn, w.opcode,
                    type != IbvQpType.RC && !xrc ? "on a " + type + " QP" : "with " + w.numSge + " SGEs",
                    w.opcode == IbvWrOpcode.FLUSH ? "the range is remoteAddr and flushLength" : "the 8 bytes in compareAdd"), w);
        }
        if (w.opcode == IbvWrOpcode.FLUSH && ((w.flushType & ~(IbvSendWr.FLUSH_GLOBAL | IbvSendWr.FLUSH_PERSISTENT)) != 0
                || w.flushLevel != IbvSendWr.FLUSH_RANGE && w.flushLevel != IbvSendWr.FLUSH_MR || w.flushLength < 0
                || w.flushLength > 0x8000_0000L)) {
            throw new PostException(Errno.EINVAL, String.format(
                    "QP 0x%x: FLUSH type 0x%x level %d length %d (type GLOBAL|PERSISTENT, level RANGE or MR, length 0..2^31)", qpn,
                    w.flushType, w.flushLevel, w.flushLength), w);
        }
        boolean inl = (w.sendFlags & IbvSendWr.SEND_INLINE) != 0;
        long total = w.totalLength();
        if (inl && (total > maxInline || w.opcode == IbvWrOpcode.RDMA_READ || w.opcode.isAtomic() || noData)) {
            throw new PostException(Errno.EINVAL, String.format("QP 0x%x: inline %s of %d bytes (max_inline_data %d)", qpn,
                    w.opcode, total, maxInline), w);
        }
    }

    /** The control segment of the WQE at basic block {@code bb}: index and opcode, QP and size, the flags, the immediate (or FLUSH's FETH word). */
    private void setCtrlSeg(IbvSendWr w, int bb, int op, int ds) {
        MemorySegment p = buf.page(segOff(bb, 0));
        long o = segOff(bb, 0) & 4095;
        p.set(BE32, o + Qp.CTRL_OPMOD_IDX_OPCODE, (bb & 0xffff) << 8 | op);
        p.set(BE32, o + Qp.CTRL_QPN_DS, qpn << 8 | ds);
        p.set(ValueLayout.JAVA_BYTE, o + Qp.CTRL_SIGNATURE, (byte) 0);
        p.set(ValueLayout.JAVA_BYTE, o + Qp.CTRL_FM_CE_SE, (byte) (((w.sendFlags & IbvSendWr.SEND_SIGNALED) != 0 ? Qp.CTRL_CQ_UPDATE : 0)
                | ((w.sendFlags & IbvSendWr.SEND_SOLICITED) != 0 ? Qp.CTRL_SOLICITED : 0)
                | ((w.sendFlags & IbvSendWr.SEND_FENCE) != 0 ? Qp.CTRL_FENCE : 0)));
        // FLUSH: the FETH word (placement type, selectivity level) where an immediate would go
        p.set(BE32, o + Qp.CTRL_IMM, op == Wqe.OP_FLUSH ? w.flushLevel << Wqe.FLUSH_LEVEL_SHIFT | w.flushType : w.immData);
    }

    /** {@code set_datagram_seg}: the address vector, three segments from {@code seg}, cleared then filled from the AH. */
    private void setDatagramSeg(IbvSendWr w, int bb, int seg) {
        for (int i = 0; i < 3; i++) { // cleared without a view per post
            long so = segOff(bb, seg + i);
            buf.page(so).set(BE64, so & 4095, 0);
            buf.page(so).set(BE64, (so & 4095) + 8, 0);
        }
        long so = segOff(bb, seg);
        MemorySegment ap = buf.page(so);
        long ao = so & 4095; // the first 16 bytes: qkey, reserved, dqp, stat_rate_sl, fl_mlid, rlid
        ap.set(BE32, ao + Qp.AV_QKEY, w.remoteQkey);
        ap.set(BE32, ao + Qp.AV_DQP, Qp.AV_EXTENDED | w.remoteQpn & 0xff_ffff);
        ap.set(org.peerdirect.hca.cx4.ifc.CmdEntry.BE16, ao + Qp.AV_RLID, (short) w.ah.dlid());
        if (w.ah.isGlobal()) { // mlx5_wqe_av: hop limit, grh | sgid index, the remote GID (segments 2 and 3)
            long gso = segOff(bb, seg + 1);
            MemorySegment gp = buf.page(gso);
            long go = gso & 4095; // AV bytes 0x10..0x1f
            gp.set(ValueLayout.JAVA_BYTE, go + (Qp.AV_HOP_LIMIT - 0x10), (byte) w.ah.hopLimit());
            gp.set(BE32, go + (Qp.AV_GRH_GID_FL - 0x10), Qp.AV_GRH | (w.ah.sgidIndex() & 0xff) << 20);
            long rso = segOff(bb, seg + 2);
            MemorySegment rp = buf.page(rso);
            rp.set(BE64, (rso & 4095) + (Qp.AV_RGID - 0x20), w.ah.dgidHigh());
            rp.set(BE64, (rso & 4095) + (Qp.AV_RGID - 0x20) + 8, w.ah.dgidLow());
        }
    }

    /**
     * {@code set_raddr_seg}, then {@code set_atomic_seg} for an opcode with one (ATOMIC WRITE: the
     * value in the first field, as a fetch-and-add's addend). Returns the next segment.
     */
    private int setRaddrAtomicSegs(IbvSendWr w, int op, int bb, int seg) {
        long so = segOff(bb, seg);
        MemorySegment sp = buf.page(so);
        sp.set(BE64, (so & 4095) + Qp.RADDR_VA, w.remoteAddr);
        sp.set(BE32, (so & 4095) + Qp.RADDR_RKEY, w.rkey);
        sp.set(BE32, (so & 4095) + Qp.RADDR_FLUSH_LEN, op == Wqe.OP_FLUSH ? (int) w.flushLength : 0);
        seg++;
        if (Wqe.hasAtomicSegment(op)) {
            so = segOff(bb, seg);
            sp = buf.page(so);
            boolean cs = op == Wqe.OP_ATOMIC_CS;
            sp.set(BE64, (so & 4095) + Qp.ATOMIC_SWAP_ADD, cs ? w.swap : w.compareAdd);
            sp.set(BE64, (so & 4095) + Qp.ATOMIC_COMPARE, cs ? w.compareAdd : 0);
            seg++;
        }
        return seg;
    }

    /** Inline data: the 4-byte header, then the bytes, running on across basic blocks (and the ring's end). */
    private void writeInline(IbvSendWr w, int bb, int seg, int total) {
        long so = segOff(bb, seg);
        buf.page(so).set(BE32, (so & 4095), Qp.INLINE_SEG | total);
        int posInWqe = seg * Qp.DS_SIZE + 4; // byte offset from the WQE's start
        for (int i = 0; i < w.numSge; i++) {
            long va = w.sgList[i].addr;
            int left = w.sgList[i].length;
            while (left > 0) {
                int bbOff = posInWqe % Qp.SEND_WQE_BB;
                int n = Math.min(left, Qp.SEND_WQE_BB - bbOff);
                long off = sqOffset + (long) ((bb + posInWqe / Qp.SEND_WQE_BB) & sqBbs - 1) * Qp.SEND_WQE_BB + bbOff;
                try {
                    buf.process.copyOut(va, buf.page(off), off & 4095, n);
                } catch (RuntimeException e) {
                    throw new PostException(Errno.EFAULT, String.format("QP 0x%x: inline data at 0x%x: %s", qpn, va, e.getMessage()), w);
                }
                va += n;
                left -= n;
                posInWqe += n;
            }
        }
    }

    /**
     * The doorbell record (release), then the BlueFlame register: the whole WQE when a single
     * request was posted and it fits the buffer ({@code mlx5_bf_copy}, one write-combined burst,
     * so the device need not read it), else the last WQE's first 8 bytes (a doorbell).
     *
     * @see "_mlx5_post_send() in providers/mlx5/qp.c (post_send_db)"
     */
    private void ringSend(int ctrlBb, int posted) {
        assert sqLock.isHeldByCurrentThread();
        VarHandle.releaseFence();
        buf.dbr().set(BE32, Qp.DBR_SND, sqHead & 0xffff);
        // the record and the WQE before the doorbell (libmlx5's udma_to_device_barrier: a store
        // barrier, not a full fence; the BAR write itself is a volatile store)
        VarHandle.releaseFence();
        int bbs = sqHead - ctrlBb & 0xffff;
        if (posted == 1 && bbs <= bfMaxBbs) {
            int len = bbs * Qp.SEND_WQE_BB;
            long so = segOff(ctrlBb, 0);
            if ((so & 4095) + len <= 4096 && (ctrlBb & sqBbs - 1) + bbs <= sqBbs) {
                uar.burst(Qp.UAR_BF_OFFSET + bfOffset, buf.page(so), so & 4095, len); // straight from the queue
            } else {
                for (int i = 0; i < bbs; i++) {
                    long bo = segOff(ctrlBb, 4 * i);
                    MemorySegment.copy(buf.page(bo), bo & 4095, bfStage, (long) i * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
                }
                uar.burst(Qp.UAR_BF_OFFSET + bfOffset, bfStage, 0, len);
            }
        } else {
            long so = segOff(ctrlBb, 0);
            long first8 = buf.page(so).get(NATIVE64, so & 4095);
            uar.write64(Qp.UAR_BF_OFFSET + bfOffset, first8);
        }
        bfOffset ^= bfSize;
    }

    /** The poller saw the CQE of the WQE at basic block {@code counter}: it and every WQE before it are done. */
    long sendCompleted(int counter) {
        int i = counter & sqBbs - 1;
        sqTail = sqNext[i];
        return sqWrid[i];
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
        sqLock.lock();
        try {
            while (k < max && sqTail != sqHead) {
                int i = sqTail & sqBbs - 1;
                flushed(wc[k++], IbvWcOpcode.SEND, sqWrid[i]);
                sqTail = sqNext[i];
            }
            return k;
        } finally {
            sqLock.unlock();
        }
    }

    /** {@code sw_comp} of the receive queue. */
    int flushRecv(IbvWc[] wc, int k, int max) {
        rqLock.lock();
        try {
            while (k < max && rqTail != rqHead) {
                flushed(wc[k++], IbvWcOpcode.RECV, rqWrid[rqTail & rqWqes - 1]);
                rqTail = rqTail + 1 & 0xffff;
            }
            return k;
        } finally {
            rqLock.unlock();
        }
    }

    private void flushed(IbvWc w, IbvWcOpcode opcode, long wrId) {
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
