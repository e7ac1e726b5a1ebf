package org.peerdirect.mlx5.lib;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.ib.core.provider.IbCqEvents;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;

/**
 * libmlx5's CQ ({@code struct mlx5_cq}, {@code mlx5_poll_cq}, {@code mlx5_arm_cq}): the ring of
 * 64-byte CQEs the device writes into the process's buffer. A CQE is software's when its opcode is
 * not INVALID and its owner bit equals the pass bit of the consumer index; its fields are read
 * after the owner byte (acquire). The consumer index goes to the doorbell record's {@code set_ci}
 * with release. Arming writes the record's arm word, then the UAR CQ doorbell.
 *
 * <p>Lock rules: {@link #lock} (libmlx5's {@code cq->lock}) serialises pollers and guards
 * {@link #ci} and {@link #armSn}; nothing else is shared with other CQs or QPs. No allocation on
 * poll.
 */
public final class Mlx5Cq implements IbCqOps {

    /** What the driver does for a CQ beyond the data path ({@code destroy_cq}). */
    public interface Control {
        void destroy();
    }

    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfShort BE16 = org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();

    public final int cqn;
    public final IbCqEvents events;
    private final UserBuf buf;
    private final int logSize;
    private final UarPage uar;
    private final Mlx5Qp[] qpTable;
    /** srqn → SRQ ({@code mlx5_find_srq}): a receive CQE naming an SRQ completes that SRQ's WQE. */
    private final Mlx5Srq[] srqTable;
    private final Control control;
    private final ReentrantLock lock = new ReentrantLock();
    private int ci;
    private int armSn;
    private volatile boolean overrun;
    /**
     * Set by the reset flow ({@link #internalError}): the device will write nothing more, so
     * work it never completed is completed here, in software, with WR_FLUSH_ERR.
     */
    private volatile boolean fatal;
    /** A queue this CQ flushes in the reset flow: {@code qp}'s send queue, or its receive queue. */
    private record Flush(Mlx5Qp qp, boolean send) {
    }

    /** The queues this CQ flushes in the reset flow; guarded by lock. */
    private final java.util.List<Flush> flushList = new java.util.ArrayList<>();

    public Mlx5Cq(int cqn, IbCqEvents events, UserBuf buf, int logSize, UarPage uar, Mlx5Qp[] qpTable, Mlx5Srq[] srqTable, Control control) {
        this.srqTable = srqTable;
        this.cqn = cqn;
        this.events = events;
        this.buf = buf;
        this.logSize = logSize;
        this.uar = uar;
        this.qpTable = qpTable;
        this.control = control;
    }

    /** The {@code op_own} byte of a new ring's CQEs: INVALID, so owner 0 is never mistaken for a CQE of the first pass. */
    public static final byte INIT_OP_OWN = (byte) (Cq.CQE_INVALID << 4 | 1);

    /** Fills a new ring with INVALID CQEs ({@link #INIT_OP_OWN}). */
    public static void initRing(UserBuf buf, int logSize) {
        for (long off = 0; off < (long) Cq.CQE_SIZE << logSize; off += Cq.CQE_SIZE) {
            buf.page(off).set(ValueLayout.JAVA_BYTE, (off & 4095) + Cq.CQE_OP_OWN, INIT_OP_OWN);
        }
    }

    /**
     * {@code get_sw_cqe}: the CQE whose {@code op_own} byte is {@code opOwn}, at consumer index
     * {@code ci} of a ring of 2^logSize, belongs to software: not INVALID, and its owner bit is
     * the pass's ({@code ci >> logSize & 1}).
     */
    public static boolean swOwned(int opOwn, int ci, int logSize) {
        return opOwn >>> 4 != Cq.CQE_INVALID && (opOwn & 1) == (ci >>> logSize & 1);
    }

    /** The arm word of the doorbell record ({@code mlx5_arm_cq}): sequence number, command, consumer index. */
    public static int armWord(int armSn, int cmd, int ci) {
        return (armSn & 3) << 28 | cmd | ci & 0xff_ffff;
    }

    /** The UAR CQ doorbell's 64-bit value for {@code word}: be32(word), be32(cqn) in memory order. */
    public static long armDoorbell(int word, int cqn) {
        return Long.reverseBytes((long) word << 32 | cqn & 0xffff_ffffL);
    }

    /**
     * mlx5_ib's reset flow ({@code mlx5_ib_handle_internal_error}, {@code mlx5_ib_poll_sw_comp}):
     * the device is dead or gone and will never complete what was posted, so from now on
     * {@link #poll} returns, after the CQEs the device did write, one WR_FLUSH_ERR completion per
     * outstanding WQE of {@code qp}'s send ({@code send} true) or receive queue. Users get errors,
     * never a wait for completions that cannot come. The kernel does this for kernel consumers;
     * the library part does it here because its users are the tools and tests of this project.
     */
    public void internalError(Mlx5Qp qp, boolean send) {
        lock.lock();
        try {
            Flush f = new Flush(qp, send);
            if (!flushList.contains(f)) {
                flushList.add(f);
            }
            fatal = true;
        } finally {
            lock.unlock();
        }
    }

    /** The CQ error event ({@code IB_EVENT_CQ_ERR}): the device overran the ring. */
    public void overrun() {
        overrun = true;
    }

    @Override
    public int poll(int n, IbvWc[] wc) {
        lock.lock();
        try {
            if (overrun) {
                return -1;
            }
            int k = 0;
            int max = Math.min(n, wc.length);
            // in the reset flow the ring is no longer pinned and the device writes nothing: work it
            // completed but not polled yet is flushed with the rest
            while (k < max && !fatal) {
                long off = (long) (ci & (1 << logSize) - 1) * Cq.CQE_SIZE;
                MemorySegment page = buf.page(off);
                long o = off & 4095;
                int opOwn = (byte) BYTE.getAcquire(page, o + Cq.CQE_OP_OWN) & 0xff;
                int opcode = opOwn >>> 4;
                if (!swOwned(opOwn, ci, logSize)) {
                    break;
                }
                toWc(page, o, opcode, wc[k]);
                ci++;
                k++;
            }
            if (k > 0) {
                MemorySegment dbr = buf.dbr();
                VarHandle.releaseFence();
                dbr.set(BE32, Cq.DBR_SET_CI, ci & 0xff_ffff);
            }
            if (fatal) { // after every CQE the device wrote: the work it never will complete
                for (int i = 0; i < flushList.size() && k < max; i++) {
                    Flush f = flushList.get(i);
                    k = f.send() ? f.qp().flushSend(wc, k, max) : f.qp().flushRecv(wc, k, max);
                }
            }
            return k;
        } finally {
            lock.unlock();
        }
    }

    private void toWc(MemorySegment p, long o, int opcode, IbvWc w) {
        int qpn = p.get(BE32, o + Cq.CQE_SOP_DROP_QPN) & 0xff_ffff;
        int counter = p.get(BE16, o + Cq.CQE_WQE_COUNTER) & 0xffff;
        Mlx5Qp qp = qpn < qpTable.length ? qpTable[qpn] : null;
        w.qpNum = qpn;
        w.vendorErr = 0;
        w.wcFlags = 0;
        w.immData = 0;
        w.byteLen = p.get(BE32, o + Cq.CQE_BYTE_CNT);
        switch (opcode) {
            case Cq.CQE_REQ -> {
                w.status = IbvWcStatus.SUCCESS;
                w.opcode = sendOpcode(p.get(BE32, o + Cq.CQE_SOP_DROP_QPN) >>> 24);
                w.wrId = qp == null ? 0 : qp.sendCompleted(counter);
            }
            case Cq.CQE_REQ_ERR, Cq.CQE_RESP_ERR -> {
                int synd = p.get(ValueLayout.JAVA_BYTE, o + Cq.CQE_SYNDROME) & 0xff;
                w.status = status(synd);
                w.vendorErr = p.get(ValueLayout.JAVA_BYTE, o + Cq.CQE_VENDOR_ERR_SYND) & 0xff;
                w.byteLen = 0;
                if (opcode == Cq.CQE_REQ_ERR) {
                    w.opcode = sendOpcode(p.get(BE32, o + Cq.CQE_SOP_DROP_QPN) >>> 24);
                    w.wrId = qp == null ? 0 : qp.sendCompleted(counter);
                } else {
                    w.opcode = IbvWcOpcode.RECV;
                    w.wrId = recvCompleted(p, o, qp, counter);
                }
                if (qp != null) {
                    qp.sawError(); // the hardware moved the QP to the error state
                }
            }
            default -> {
                w.status = IbvWcStatus.SUCCESS;
                w.opcode = opcode == Cq.CQE_RESP_WR_IMM ? IbvWcOpcode.RECV_RDMA_WITH_IMM : IbvWcOpcode.RECV;
                if (opcode == Cq.CQE_RESP_WR_IMM || opcode == Cq.CQE_RESP_SEND_IMM) {
                    w.wcFlags |= IbvWc.WC_WITH_IMM;
                    w.immData = p.get(BE32, o + Cq.CQE_IMM);
                }
                int flagsRqpn = p.get(BE32, o + Cq.CQE_FLAGS_RQPN);
                if ((flagsRqpn >>> 28 & 3) != 0) {
                    w.wcFlags |= IbvWc.WC_GRH;
                }
                w.srcQp = flagsRqpn & 0xff_ffff;
                w.slid = p.get(BE16, o + Cq.CQE_SLID) & 0xffff;
                w.wrId = recvCompleted(p, o, qp, counter);
            }
        }
    }

    /**
     * A receive CQE's WQE back to its owner: the SRQ the CQE names ({@code srqn}, cqe_version 0's
     * {@code get_srq_ctx}: XRC receives come this way, their QP being the target, not the
     * library's), else the QP's receive queue.
     */
    private long recvCompleted(MemorySegment p, long o, Mlx5Qp qp, int counter) {
        int srqn = p.get(BE32, o + Cq.CQE_SRQN) & 0xff_ffff;
        Mlx5Srq srq = srqn != 0 && srqn < srqTable.length ? srqTable[srqn] : null;
        if (srq != null) {
            return srq.completed(counter);
        }
        return qp == null ? 0 : qp.recvCompleted(counter);
    }

    private static IbvWcOpcode sendOpcode(int op) {
        return switch (op) {
            case Wqe.OP_RDMA_WRITE, Wqe.OP_RDMA_WRITE_IMM -> IbvWcOpcode.RDMA_WRITE;
            case Wqe.OP_RDMA_READ -> IbvWcOpcode.RDMA_READ;
            case Wqe.OP_ATOMIC_CS -> IbvWcOpcode.COMP_SWAP;
            case Wqe.OP_ATOMIC_FA -> IbvWcOpcode.FETCH_ADD;
            case Wqe.OP_ATOMIC_WRITE -> IbvWcOpcode.ATOMIC_WRITE;
            case Wqe.OP_FLUSH -> IbvWcOpcode.FLUSH;
            default -> IbvWcOpcode.SEND;
        };
    }

    /** {@code mlx5_handle_error_cqe}. */
    static IbvWcStatus status(int syndrome) {
        return switch (syndrome) {
            case Cq.SYND_LOCAL_LENGTH -> IbvWcStatus.LOC_LEN_ERR;
            case Cq.SYND_LOCAL_QP_OP -> IbvWcStatus.LOC_QP_OP_ERR;
            case Cq.SYND_LOCAL_PROT -> IbvWcStatus.LOC_PROT_ERR;
            case Cq.SYND_WR_FLUSH -> IbvWcStatus.WR_FLUSH_ERR;
            case Cq.SYND_MW_BIND -> IbvWcStatus.MW_BIND_ERR;
            case Cq.SYND_BAD_RESP -> IbvWcStatus.BAD_RESP_ERR;
            case Cq.SYND_LOCAL_ACCESS -> IbvWcStatus.LOC_ACCESS_ERR;
            case Cq.SYND_REMOTE_INVAL_REQ -> IbvWcStatus.REM_INV_REQ_ERR;
            case Cq.SYND_REMOTE_ACCESS -> IbvWcStatus.REM_ACCESS_ERR;
            case Cq.SYND_REMOTE_OP -> IbvWcStatus.REM_OP_ERR;
            case Cq.SYND_TRANSPORT_RETRY_EXC -> IbvWcStatus.RETRY_EXC_ERR;
            case Cq.SYND_RNR_RETRY_EXC -> IbvWcStatus.RNR_RETRY_EXC_ERR;
            case Cq.SYND_REMOTE_ABORTED -> IbvWcStatus.REM_ABORT_ERR;
            default -> IbvWcStatus.GENERAL_ERR;
        };
    }

    /** {@code mlx5_arm_cq}: the arm word in the doorbell record, then the 64-bit UAR doorbell. */
    @Override
    public void reqNotify(boolean solicitedOnly) {
        int word;
        lock.lock();
        try {
            int cmd = solicitedOnly ? Cq.DB_REQ_NOT_SOL : Cq.DB_REQ_NOT;
            word = armWord(armSn, cmd, ci);
            buf.dbr().set(BE32, Cq.DBR_ARM, word);
        } finally {
            lock.unlock();
        }
        VarHandle.fullFence(); // the record before the doorbell
        uar.write64(Cq.UAR_CQ_DOORBELL, armDoorbell(word, cqn));
    }

    /** The EQ's completion event: the arm sequence number advances ({@code mlx5_cq_event}'s {@code arm_sn++}). */
    public void completionEvent() {
        lock.lock();
        try {
            armSn++;
        } finally {
            lock.unlock();
        }
        events.completion();
    }

    @Override
    public int cqe() {
        return (1 << logSize) - 1;
    }

    @Override
    public void destroyCq() {
        control.destroy();
    }
}
