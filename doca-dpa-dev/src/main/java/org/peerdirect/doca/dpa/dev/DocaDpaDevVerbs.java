package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code doca_dpa_dev_verbs.h} (DOCA 3.2): ibverbs-like posts on a DOCA verbs RC QP whose data path
 * is on the DPA ({@code doca_verbs_qp_init_attr_set_external_datapath_en}), by its DPA handle
 * ({@code doca_verbs_qp_get_dpa_handle}). Its completions go to the DOCA DPA completion context the
 * host gave the QP as send and receive CQ ({@link DocaDpaDevCompletion}).
 *
 * <p>Work requests are structures the caller fills with the setters, then posts: a post only writes
 * the WQE (and advances the software producer index); nothing reaches the NIC before the commit.
 * {@link #qpCommitSend} writes back every WQE posted ({@code __dpa_thread_memory_writeback}) and
 * rings the send doorbell through the QP's outbox once for all of them; {@link #qpCommitRecv}
 * fences the receive WQEs before the doorbell record ({@code memory_fence(W, W)}), advances it to
 * the posted count and writes it back. The memory-model checker sees each store: a doorbell over a
 * WQE still in the write buffer is C1 naming the doorbell's line, a record before its WQE is C6.
 *
 * <p>[model] DOCA does not publish its structures. Here, little-endian in DPA memory:
 * <ul>
 * <li>a {@code doca_dpa_dev_verbs_qp_t} is the DPA address of the QP's descriptor, written by the host
 * library ({@code Q_*}: QP number, outbox, the DOCA QP state (the host writes it at each modify),
 * log2 of the send and receive depths and of the receive stride, the max SGEs, the software
 * producer indexes, the index of the last send doorbell, the work queue and the doorbell record);</li>
 * <li>a {@code struct doca_dpa_dev_verbs_send_wr} is {@link #SEND_WR_SIZE} bytes ({@code SW_*}), a
 * {@code struct doca_dpa_dev_verbs_recv_wr} {@link #RECV_WR_SIZE} bytes ({@code RW_*}), a
 * {@code struct doca_dpa_dev_verbs_sge} {@link #SGE_SIZE} bytes: {@code addr} u64, {@code lkey} u32,
 * {@code length} u32 (the C field names), filled by the caller with plain stores;</li>
 * <li>the opcodes, flags and fence modes are mlx5's ({@code MLX5_OPCODE_*}, {@code fm_ce_se}).</li>
 * </ul>
 *
 * <p>A post on a QP not in RTS (send) or not at least INIT (receive), a WR with more SGEs than the
 * QP was created with, or an opcode DOCA does not define ends the process with a {@code ERROR_*}
 * code (the host sees it as the process's error): DOCA's calls return nothing to report it with.
 *
 * <p>Not thread-safe, as DOCA documents ("All DOCA DPA objects are non-thread-safe"): every post
 * and commit tells the checker which object it is inside ({@code Dpa.objectEnter}/{@code
 * objectLeave}), so two harts in one at once are C8. <b>The rule</b> (as {@link DocaDpaDevRdma}'s:
 * the key is the state the call changes): {@link #qpPostSendWr} and {@link #qpCommitSend} change
 * the send queue (its producer index and last doorbell), keyed on the QP; {@link #qpPostRecvWr} and
 * {@link #qpCommitRecv} change the receive queue (its producer index and doorbell record), keyed on
 * the QP's receive half ({@link #rqKey}). Two threads sending on one QP race; a thread sending
 * beside one receiving on the same QP touch disjoint queues (ibverbs' providers lock them apart).
 * A commit's doorbell is its last act and comes after it left the object: the doorbell touches
 * no state of the QP, and the thread a completion of this very send wakes may post on the QP at
 * once (NVIDIA's samples post the first send from an RPC and the next ones from the thread).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+verbs/index.html">DOCA Verbs</a>
 */
public final class DocaDpaDevVerbs {

    /** {@code enum doca_dpa_dev_verbs_send_wr_opcode} [model: mlx5's opcodes]. */
    public static final int SEND_WR_OPCODE_WRITE = FlexioDevQueue.OPCODE_RDMA_WRITE;
    public static final int SEND_WR_OPCODE_WRITE_IMM = FlexioDevQueue.OPCODE_RDMA_WRITE_IMM;
    public static final int SEND_WR_OPCODE_SEND = FlexioDevQueue.OPCODE_SEND;
    public static final int SEND_WR_OPCODE_SEND_IMM = FlexioDevQueue.OPCODE_SEND_IMM;
    public static final int SEND_WR_OPCODE_READ = FlexioDevQueue.OPCODE_RDMA_READ;
    /** {@code enum doca_dpa_dev_verbs_send_wr_flags}: {@code SIGNALED} asks for a completion (mlx5's CQ update bits). */
    public static final int SEND_WR_FLAGS_NONE = 0;
    public static final int SEND_WR_FLAGS_SIGNALED = FlexioDevQueue.CTRL_CQ_UPDATE;
    /** {@code enum doca_dpa_dev_verbs_send_wr_fm}: mlx5's fence modes (bits 7:5 of {@code fm_ce_se}). */
    public static final int SEND_WR_FM_NO_FENCE = 0;
    public static final int SEND_WR_FM_INITIATOR_SMALL_FENCE = 1 << 5;
    public static final int SEND_WR_FM_FENCE = 2 << 5;
    public static final int SEND_WR_FM_STRONG_ORDERING = 3 << 5;
    public static final int SEND_WR_FM_FENCE_AND_INITIATOR_SMALL_FENCE = 4 << 5;

    /** The send WR: opcode, flags, fence mode, SGE count, immediate (u32 each), SGE list, remote address (u64), rkey (u32). */
    public static final int SW_OPCODE = 0, SW_FLAGS = 4, SW_FENCE = 8, SW_NUM_SGE = 12, SW_IMM = 16, SW_SG_LIST = 24, SW_RADDR = 32,
            SW_RKEY = 40, SEND_WR_SIZE = 48;
    /** The receive WR: SGE list (u64), SGE count (u32). */
    public static final int RW_SG_LIST = 0, RW_NUM_SGE = 8, RECV_WR_SIZE = 16;
    /** {@code struct doca_dpa_dev_verbs_sge}. */
    public static final int SGE_ADDR = 0, SGE_LKEY = 8, SGE_LENGTH = 12, SGE_SIZE = 16;

    /** The QP descriptor (u32 unless said). */
    public static final int Q_QPN = 0, Q_OUTBOX = 4, Q_STATE = 8, Q_LOG_SQ = 12, Q_LOG_RQ = 16, Q_LOG_RQ_STRIDE = 20, Q_MAX_SEND_SGE = 24,
            Q_MAX_RECV_SGE = 28, Q_SQ_PI = 32, Q_SQ_DB = 36, Q_RQ_PI = 40, Q_WQ = 48 /* u64 */, Q_DBR = 56 /* u64 */, QP_DESC_SIZE = 64;
    /** The DOCA QP states the host writes at {@code Q_STATE} ({@code enum doca_verbs_qp_state}). */
    public static final int QP_STATE_RST = 0, QP_STATE_INIT = 1, QP_STATE_RTR = 2, QP_STATE_RTS = 3, QP_STATE_SQD = 4, QP_STATE_SQE = 5,
            QP_STATE_ERR = 6;
    /** Send SGEs a WQE basic block holds after its control and remote-address segments. */
    public static final int MAX_SEND_SGE = 2;

    /** Process error codes ({@code flexio_dev_error}): a send post on a QP not in RTS, a receive on one in RESET or ERR. */
    public static final int ERROR_QP_STATE = 0xd2;
    /** A WR with no SGE or more than the QP's max. */
    public static final int ERROR_NUM_SGE = 0xd3;
    /** An opcode {@code doca_dpa_dev_verbs_send_wr_opcode} does not define. */
    public static final int ERROR_OPCODE = 0xd4;

    private DocaDpaDevVerbs() {
    }

    // ------------------------------------------------------------------ send WR setters

    /** {@code doca_dpa_dev_verbs_send_wr_set_opcode}. */
    public static void sendWrSetOpcode(long wr, int opcode) {
        Dpa.st32(wr + SW_OPCODE, opcode);
    }

    /** {@code doca_dpa_dev_verbs_send_wr_set_send_flags}. */
    public static void sendWrSetSendFlags(long wr, int flags) {
        Dpa.st32(wr + SW_FLAGS, flags);
    }

    /** {@code doca_dpa_dev_verbs_send_wr_set_fence_mode}. */
    public static void sendWrSetFenceMode(long wr, int fm) {
        Dpa.st32(wr + SW_FENCE, fm);
    }

    /** {@code doca_dpa_dev_verbs_send_wr_set_sg_list}: the address of the WR's SGE array. */
    public static void sendWrSetSgList(long wr, long sgList) {
        Dpa.st64(wr + SW_SG_LIST, sgList);
    }

    /** {@code doca_dpa_dev_verbs_send_wr_set_sg_num_sge}. */
    public static void sendWrSetSgNumSge(long wr, int num) {
        Dpa.st32(wr + SW_NUM_SGE, num);
    }

    /** {@code doca_dpa_dev_verbs_send_wr_set_rdma_remote_addr}: for WRITE, WRITE_IMM and READ. */
    public static void sendWrSetRdmaRemoteAddr(long wr, long raddr) {
        Dpa.st64(wr + SW_RADDR, raddr);
    }

    /** {@code doca_dpa_dev_verbs_send_wr_set_rdma_rkey}: a {@code doca_dpa_dev_mmap_t} of the remote side. */
    public static void sendWrSetRdmaRkey(long wr, int rkey) {
        Dpa.st32(wr + SW_RKEY, rkey);
    }

    /** {@code doca_dpa_dev_verbs_send_wr_set_imm_data}: for SEND_IMM and WRITE_IMM. */
    public static void sendWrSetImmData(long wr, int imm) {
        Dpa.st32(wr + SW_IMM, imm);
    }

    // ------------------------------------------------------------------ receive WR setters

    /** {@code doca_dpa_dev_verbs_recv_wr_set_sg_list}. */
    public static void recvWrSetSgList(long wr, long sgList) {
        Dpa.st64(wr + RW_SG_LIST, sgList);
    }

    /** {@code doca_dpa_dev_verbs_recv_wr_set_sg_num_sge}. */
    public static void recvWrSetSgNumSge(long wr, int num) {
        Dpa.st32(wr + RW_NUM_SGE, num);
    }

    // ------------------------------------------------------------------ posts and commits

    /**
     * {@code doca_dpa_dev_verbs_qp_post_send_wr}: the WR's WQE at the send producer index, the index
     * advanced; no doorbell ({@link #qpCommitSend} rings it).
     */
    public static void qpPostSendWr(long qp, long wr) {
        Dpa.objectEnter(qp);
        if (Dpa.ld32(qp + Q_STATE) != QP_STATE_RTS) {
            FlexioDev.error(ERROR_QP_STATE);
        }
        int opcode = Dpa.ld32(wr + SW_OPCODE);
        if (opcode != SEND_WR_OPCODE_SEND && opcode != SEND_WR_OPCODE_SEND_IMM && opcode != SEND_WR_OPCODE_WRITE
                && opcode != SEND_WR_OPCODE_WRITE_IMM && opcode != SEND_WR_OPCODE_READ) {
            FlexioDev.error(ERROR_OPCODE);
        }
        int nsge = Dpa.ld32(wr + SW_NUM_SGE);
        if (nsge < 1 || nsge > Dpa.ld32(qp + Q_MAX_SEND_SGE)) {
            FlexioDev.error(ERROR_NUM_SGE);
        }
        boolean remote = opcode == SEND_WR_OPCODE_WRITE || opcode == SEND_WR_OPCODE_WRITE_IMM || opcode == SEND_WR_OPCODE_READ;
        int pi = Dpa.ld32(qp + Q_SQ_PI);
        long sq = Dpa.ld64(qp + Q_WQ) + ((16L << Dpa.ld32(qp + Q_LOG_RQ_STRIDE)) << Dpa.ld32(qp + Q_LOG_RQ));
        long wqe = FlexioDevQueue.swqeAt(sq, pi, Dpa.ld32(qp + Q_LOG_SQ));
        int fmCe = (Dpa.ld32(wr + SW_FENCE) & 0xe0) | (Dpa.ld32(wr + SW_FLAGS) & SEND_WR_FLAGS_SIGNALED);
        FlexioDevQueue.swqeSegCtrlSet(wqe, pi, Dpa.ld32(qp + Q_QPN), fmCe, opcode, 1 + (remote ? 1 : 0) + nsge, Dpa.ld32(wr + SW_IMM));
        long seg = wqe + FlexioDevQueue.SEG_SIZE;
        if (remote) {
            FlexioDevQueue.swqeSegRdmaSet(seg, Dpa.ld32(wr + SW_RKEY), Dpa.ld64(wr + SW_RADDR));
            seg += FlexioDevQueue.SEG_SIZE;
        }
        long sge = Dpa.ld64(wr + SW_SG_LIST);
        for (int i = 0; i < nsge; i++, sge += SGE_SIZE, seg += FlexioDevQueue.SEG_SIZE) {
            FlexioDevQueue.swqeSegMemPtrDataSet(seg, Dpa.ld32(sge + SGE_LENGTH), Dpa.ld32(sge + SGE_LKEY), Dpa.ld64(sge + SGE_ADDR));
        }
        Dpa.st32(qp + Q_SQ_PI, pi + 1);
        Dpa.objectLeave(qp);
    }

    /**
     * {@code doca_dpa_dev_verbs_qp_commit_send}: every send WQE posted since the last commit goes to
     * the NIC: written back first, then one doorbell with the producer index. Nothing posted: no doorbell.
     */
    public static void qpCommitSend(long qp) {
        Dpa.objectEnter(qp);
        int pi = Dpa.ld32(qp + Q_SQ_PI);
        if (pi == Dpa.ld32(qp + Q_SQ_DB)) {
            Dpa.objectLeave(qp);
            return;
        }
        int outbox = Dpa.ld32(qp + Q_OUTBOX);
        int qpn = Dpa.ld32(qp + Q_QPN);
        Dpa.st32(qp + Q_SQ_DB, pi); // the QP's state complete before the doorbell: see the class comment
        Dpa.memoryWriteback(); // the WQEs (and the data they send) before the doorbell
        Dpa.objectLeave(qp);
        FlexioDev.outboxConfig(outbox);
        FlexioDev.qpSqRingDb(pi, qpn);
    }

    /**
     * {@code doca_dpa_dev_verbs_qp_post_recv_wr}: the WR's receive WQE at the receive producer
     * index (its scatter list ended by an invalid-lkey segment when shorter than the stride), the
     * index advanced; the doorbell record waits for {@link #qpCommitRecv}.
     */
    public static void qpPostRecvWr(long qp, long wr) {
        Dpa.objectEnter(rqKey(qp));
        int state = Dpa.ld32(qp + Q_STATE);
        if (state == QP_STATE_RST || state == QP_STATE_ERR) {
            FlexioDev.error(ERROR_QP_STATE);
        }
        int nsge = Dpa.ld32(wr + RW_NUM_SGE);
        if (nsge < 1 || nsge > Dpa.ld32(qp + Q_MAX_RECV_SGE)) {
            FlexioDev.error(ERROR_NUM_SGE);
        }
        int pi = Dpa.ld32(qp + Q_RQ_PI);
        int logStride = Dpa.ld32(qp + Q_LOG_RQ_STRIDE);
        long rwqe = Dpa.ld64(qp + Q_WQ) + ((long) (pi & (1 << Dpa.ld32(qp + Q_LOG_RQ)) - 1) << (4 + logStride));
        long sge = Dpa.ld64(wr + RW_SG_LIST);
        for (int i = 0; i < nsge; i++, sge += SGE_SIZE) {
            FlexioDevQueue.rwqeSet(rwqe + (long) i * FlexioDevQueue.SEG_SIZE, Dpa.ld32(sge + SGE_LENGTH), Dpa.ld32(sge + SGE_LKEY),
                    Dpa.ld64(sge + SGE_ADDR));
        }
        if (nsge < 1 << logStride) {
            FlexioDevQueue.rwqeSet(rwqe + (long) nsge * FlexioDevQueue.SEG_SIZE, 0, DocaDpaDevRdma.INVALID_LKEY, 0);
        }
        Dpa.st32(qp + Q_RQ_PI, pi + 1);
        Dpa.objectLeave(rqKey(qp));
    }

    /**
     * {@code doca_dpa_dev_verbs_qp_commit_recv}: the receive WQEs posted become the NIC's: a W→W
     * fence orders them before the doorbell record, the record's counter set to the posted count,
     * then written back (the NIC reads the record from memory).
     */
    public static void qpCommitRecv(long qp) {
        Dpa.objectEnter(rqKey(qp));
        long dbr = Dpa.ld64(qp + Q_DBR);
        int pi = Dpa.ld32(qp + Q_RQ_PI) & 0xffff;
        if (pi != FlexioDevQueue.dbrRqGetPi(dbr)) {
            Dpa.memoryFence(Dpa.W, Dpa.W); // the WQEs before the record
            Dpa.st32(dbr, Integer.reverseBytes(pi));
            Dpa.memoryWriteback();
        }
        Dpa.objectLeave(rqKey(qp));
    }

    /** C8's key for the receive half of {@code qp} (an address inside its descriptor, never a QP handle itself). */
    private static long rqKey(long qp) {
        return qp + Q_RQ_PI;
    }
}
