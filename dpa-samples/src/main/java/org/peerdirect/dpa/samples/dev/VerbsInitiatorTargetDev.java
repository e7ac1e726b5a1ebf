package org.peerdirect.dpa.samples.dev;

import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.*;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of DOCA's {@code dpa_verbs_initiator_target} sample (doca-samples 3.3, DOCA
 * verbs with the data path on the DPA; DPA_MODEL.md §4 scenario 8): its two
 * thread kernels and two RPCs, then the mutants and the host's probes as entries of their own in
 * the same app (a DPA context runs one app, so a test that runs the sample's kernels and a mutant
 * needs both in it). The C sample's {@code struct dpa_thread_arg} is the argument block below
 * (8-byte words); the WR and SGE structures the C code keeps on its stack live in the block too
 * (the DPA's Java has no stack structures), and each completion is recorded at {@link #A_LOG} for
 * the host to check. The device program of doca-verbs' {@code DpaVerbsInitiatorTargetTest} and
 * {@code DocaVerbsQpTest} and of itest's {@code DocaVerbsIT} (scenario 8 in Felix).
 */
@DpaApp("dpa_sample_verbs_initiator_target")
public final class VerbsInitiatorTargetDev {

    /** {@code struct dpa_thread_arg}, then the record: completions taken, the mutant switch, the WR structures, the log. */
    public static final int A_COMP = 0, A_QP = 8, A_EVENT = 16, A_EVENT_VAL = 24, A_LOCAL = 32, A_REMOTE = 40, A_LMKEY = 48, A_RMKEY = 56,
            A_LEN = 64, A_STATUS = 72, A_NUM = 80, A_SGE = 96, A_SWR = 112, A_RWR = 160, A_LOG = 192, LOG_ENTRY = 32, LOG_MAX = 8,
            A_SIZE = A_LOG + LOG_ENTRY * LOG_MAX;
    /** A log entry: completion type, QP number, WQE counter, bytes received (u64 each). */
    public static final int L_TYPE = 0, L_QPN = 8, L_WQE_COUNTER = 16, L_BYTES = 24;
    /** {@code VERBS_SAMPLE_LOCAL_BUF_START_VALUE}, {@code _END_VALUE}, {@code EXPECTED_NUM_RECEIVES}. */
    public static final long START_VALUE = 0x9, END_VALUE = 0xf;
    public static final int EXPECTED = 3;

    private VerbsInitiatorTargetDev() {
    }

    /** The next completion of the thread's context, busy-waiting as the sample does; recorded, then acknowledged. */
    private static void waitCompletion(long a) {
        long comp = Dpa.ld64(a + A_COMP);
        long e;
        do {
            e = DocaDpaDevCompletion.getCompletion(comp);
        } while (e == 0);
        long n = Dpa.ld64(a + A_NUM);
        if (n < LOG_MAX) {
            long l = a + A_LOG + LOG_ENTRY * n;
            Dpa.st64(l + L_TYPE, DocaDpaDevCompletion.getCompletionType(e));
            Dpa.st64(l + L_QPN, DocaDpaDevCompletion.completionElementGetQpn(e));
            Dpa.st64(l + L_WQE_COUNTER, DocaDpaDevCompletion.completionElementGetWqeCounter(e));
            Dpa.st64(l + L_BYTES, DocaDpaDevCompletion.completionElementGetReceivedBytes(e));
        }
        Dpa.st64(a + A_NUM, n + 1);
        DocaDpaDevCompletion.completionAck(comp, 1);
    }

    /** The block's SGE over the local buffer ({@code sge.addr/lkey/length}). */
    private static long sge(long a, long addr, long lkey, long len) {
        long s = a + A_SGE;
        Dpa.st64(s + SGE_ADDR, addr);
        Dpa.st32(s + SGE_LKEY, (int) lkey);
        Dpa.st32(s + SGE_LENGTH, (int) len);
        return s;
    }

    /** The sample's {@code post_send_wr}: one SGE, signaled, no fence; posted, then committed. */
    private static void postSendWr(long qp, long wr, long sge, long raddr, long rkey, int opcode, boolean commit) {
        sendWrSetSgList(wr, sge);
        sendWrSetSgNumSge(wr, 1);
        sendWrSetSendFlags(wr, SEND_WR_FLAGS_SIGNALED);
        sendWrSetRdmaRkey(wr, (int) rkey);
        sendWrSetRdmaRemoteAddr(wr, raddr);
        sendWrSetOpcode(wr, opcode);
        sendWrSetFenceMode(wr, SEND_WR_FM_NO_FENCE);
        qpPostSendWr(qp, wr);
        if (commit) {
            qpCommitSend(qp);
        }
    }

    /** The sample's {@code post_recv_wr}: one SGE; posted, then committed. */
    private static void postRecvWr(long qp, long wr, long sge, boolean commit) {
        recvWrSetSgList(wr, sge);
        recvWrSetSgNumSge(wr, 1);
        qpPostRecvWr(qp, wr);
        if (commit) {
            qpCommitRecv(qp);
        }
    }

    /**
     * {@code initiator_thread_kernel}: waits for the RPC's send completion; then per iteration polls
     * its buffer until the target's write raised it to {@code START + 2n - 1}, increments it, sends
     * it (signaled) and waits for the send's completion; after the 3rd checks the value is
     * {@code END}, sets its sync event and finishes.
     */
    @DpaGlobal
    static void initiatorThread(long a) {
        long qp = Dpa.ld64(a + A_QP);
        long local = Dpa.ld64(a + A_LOCAL);
        long sge = sge(a, local, Dpa.ld64(a + A_LMKEY), Dpa.ld64(a + A_LEN));
        waitCompletion(a);
        long receives = 1;
        while (true) {
            while (Dpa.ld64(local) < START_VALUE + 2 * receives - 1) {
                // the target's RDMA WRITE lands here (NIC to DPA memory is coherent)
            }
            Dpa.st64(local, Dpa.ld64(local) + 1);
            if (receives == EXPECTED) {
                boolean ok = Dpa.ld64(local) == END_VALUE;
                Dpa.st64(a + A_STATUS, ok ? 0 : 1);
                DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_INFO, ok ? "---------------------------- SUCCESS ----------------------------"
                        : "---------------------------- FAILURE ----------------------------");
                Dpa.memoryWriteback(); // the status and the log, for the host's d2h copy (a NIC read)
                DocaDpaDevSyncEvent.updateSet(Dpa.ld64(a + A_EVENT), Dpa.ld64(a + A_EVENT_VAL));
                DocaDpaDev.threadFinish();
            }
            postSendWr(qp, a + A_SWR, sge, Dpa.ld64(a + A_REMOTE), Dpa.ld64(a + A_RMKEY), SEND_WR_OPCODE_SEND, true);
            waitCompletion(a);
            receives++;
        }
    }

    /**
     * {@code target_thread_kernel}: waits for the first receive; then per iteration increments its
     * buffer, posts the next receive, writes the buffer into the initiator's (signaled), and takes
     * two completions (the write's and the next receive's; after the 3rd write only the write's),
     * then sets its sync event and finishes.
     */
    @DpaGlobal
    static void targetThread(long a) {
        long qp = Dpa.ld64(a + A_QP);
        long local = Dpa.ld64(a + A_LOCAL);
        long sge = sge(a, local, Dpa.ld64(a + A_LMKEY), Dpa.ld64(a + A_LEN));
        waitCompletion(a);
        long receives = 1;
        while (true) {
            Dpa.st64(local, Dpa.ld64(local) + 1);
            postRecvWr(qp, a + A_RWR, sge, true);
            postSendWr(qp, a + A_SWR, sge, Dpa.ld64(a + A_REMOTE), Dpa.ld64(a + A_RMKEY), SEND_WR_OPCODE_WRITE, true);
            waitCompletion(a);
            if (receives == EXPECTED) {
                Dpa.st64(a + A_STATUS, 0);
                Dpa.memoryWriteback(); // the log, for the host's d2h copy
                DocaDpaDevSyncEvent.updateSet(Dpa.ld64(a + A_EVENT), Dpa.ld64(a + A_EVENT_VAL));
                DocaDpaDev.threadFinish();
            }
            waitCompletion(a);
            receives++;
        }
    }

    /** {@code initiator_trigger_first_iteration_rpc}: the first send of the buffer (signaled). */
    @DpaRpc
    static long initiatorTriggerFirstIteration(long qp, long addr, int mkey, int length, long remoteAddr, int remoteMmap, long wrs) {
        DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_INFO, "Trigger initiator first iteration");
        postSendWr(qp, wrs + A_SWR, sge(wrs, addr, mkey, length), remoteAddr, remoteMmap, SEND_WR_OPCODE_SEND, true);
        return 0;
    }

    /** {@code target_trigger_first_iteration_rpc}: the first receive into the buffer. */
    @DpaRpc
    static long targetTriggerFirstIteration(long qp, long addr, int mkey, int length, long wrs) {
        DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_INFO, "Trigger target first iteration");
        postRecvWr(qp, wrs + A_RWR, sge(wrs, addr, mkey, length), true);
        return 0;
    }

    // ---------------------------------------------------------------- the mutants (the tests', not the sample's)

    /**
     * Mutant: the first send posted, then its doorbell rung by hand through the QP's published
     * layout without {@code __dpa_thread_memory_writeback} (what {@code qp_commit_send} does first):
     * C1 when the NIC fetches the WQE, naming this method's line.
     */
    @DpaRpc
    static long commitSendWithoutWriteback(long qp, long addr, int mkey, int length, long remoteAddr, int remoteMmap, long wrs) {
        postSendWr(qp, wrs + A_SWR, sge(wrs, addr, mkey, length), remoteAddr, remoteMmap, SEND_WR_OPCODE_SEND, false);
        int pi = Dpa.ld32(qp + Q_SQ_PI);
        FlexioDev.outboxConfig(Dpa.ld32(qp + Q_OUTBOX));
        FlexioDev.qpSqRingDb(pi, Dpa.ld32(qp + Q_QPN));
        Dpa.st32(qp + Q_SQ_DB, pi);
        return 0;
    }

    /**
     * Mutant: the first receive posted, then its doorbell record advanced by hand without the
     * {@code memory_fence(W, W)} that {@code qp_commit_recv} puts between WQE and record (written
     * back after, as the commit does): C6 when the NIC takes the WQE.
     */
    @DpaRpc
    static long commitRecvWithoutFence(long qp, long addr, int mkey, int length, long wrs) {
        postRecvWr(qp, wrs + A_RWR, sge(wrs, addr, mkey, length), false);
        FlexioDevQueue.dbrRqIncPi(Dpa.ld64(qp + Q_DBR));
        Dpa.memoryWriteback();
        return 0;
    }

    // ---------------------------------------------------------------- the host's probes (DocaVerbsQpTest: each opcode, one poll)

    /**
     * One send WR of {@code opcode} (any of the five) with immediate {@code imm}, signaled or not,
     * posted and committed: the host's probe of each opcode.
     */
    @DpaRpc
    static long post(long qp, int opcode, long addr, int mkey, int length, long remoteAddr, int rkey, int imm, int signaled, long wrs) {
        long wr = wrs + A_SWR;
        sendWrSetSgList(wr, sge(wrs, addr, mkey, length));
        sendWrSetSgNumSge(wr, 1);
        sendWrSetSendFlags(wr, signaled != 0 ? SEND_WR_FLAGS_SIGNALED : SEND_WR_FLAGS_NONE);
        sendWrSetRdmaRkey(wr, rkey);
        sendWrSetRdmaRemoteAddr(wr, remoteAddr);
        sendWrSetImmData(wr, imm);
        sendWrSetOpcode(wr, opcode);
        sendWrSetFenceMode(wr, SEND_WR_FM_NO_FENCE);
        qpPostSendWr(qp, wr);
        qpCommitSend(qp);
        return 0;
    }

    /**
     * {@link #postLoop}'s block: stop word, the ranks' QPs, whether each rank receives (1) or sends
     * (0), map key and address, start barrier, the ranks' post counts; each rank's WR scratch
     * ({@link #A_SGE}..{@link #A_LOG} of a thread block) at {@code VL_AREA + rank * VL_AREA_SIZE}.
     */
    public static final int VL_STOP = 0, VL_QP = 8, VL_RECV = 24, VL_KEY = 40, VL_ADDR = 48, VL_BARRIER = 56, VL_POSTS = 64, VL_AREA = 128,
            VL_AREA_SIZE = A_LOG, VL_SIZE = VL_AREA + 2 * VL_AREA_SIZE;

    /**
     * The tests' C8 probe on verbs QPs (as doca-rdma's {@code RdmaProgs.postLoop}): after a start
     * barrier each rank posts 8-byte WRITEs (or, with {@code VL_RECV}, receives) on its QP, never
     * committed (the WQEs stay in DPA memory: no doorbell, nothing on the wire), counting them,
     * until the host writes the stop word. Two ranks sending on one QP is the mutant; a rank
     * sending beside one receiving on the same QP is silent (a send queue and a receive queue).
     */
    @DpaGlobal
    static void postLoop(long b) {
        int rank = DocaDpaDev.threadRank();
        long qp = Dpa.ld64(b + VL_QP + 8L * rank);
        boolean recv = Dpa.ld64(b + VL_RECV + 8L * rank) != 0;
        long key = Dpa.ld64(b + VL_KEY);
        long addr = Dpa.ld64(b + VL_ADDR);
        long a = b + VL_AREA + (long) VL_AREA_SIZE * rank - A_SGE; // the thread block's layout from A_SGE on
        long sge = sge(a, addr, key, 8);
        Dpa.amoAdd64(b + VL_BARRIER, 1);
        while (Dpa.ld64(b + VL_BARRIER) < DocaDpaDev.numThreads()) {
            Dpa.compilerBarrier();
        }
        long n = 0;
        while (Dpa.ld64(b + VL_STOP) == 0) {
            if (recv) {
                postRecvWr(qp, a + A_RWR, sge, false);
            } else {
                postSendWr(qp, a + A_SWR, sge, addr, key, SEND_WR_OPCODE_WRITE, false);
            }
            Dpa.st64(b + VL_POSTS + 8L * rank, ++n);
        }
    }

    /** Reads a word of DPA memory (the host's look at a count a rank is writing: a d2h copy would be the NIC reading unwritten-back bytes). */
    @DpaRpc
    static long load64(long daddr) {
        return Dpa.ld64(daddr);
    }

    /** One receive posted and committed. */
    @DpaRpc
    static long postRecv(long qp, long addr, int mkey, int length, long wrs) {
        postRecvWr(qp, wrs + A_RWR, sge(wrs, addr, mkey, length), true);
        return 0;
    }

    /**
     * Polls one completion of {@code comp}, recorded at the block's log slot {@code slot} (type, QP
     * number, WQE counter, bytes; the immediate and the send opcode after), acknowledged; -1 when none.
     */
    @DpaRpc
    static long pollOne(long comp, long wrs, int slot) {
        long e = DocaDpaDevCompletion.getCompletion(comp);
        if (e == 0) {
            return -1;
        }
        long l = wrs + A_LOG + LOG_ENTRY * (long) slot;
        Dpa.st64(l + L_TYPE, DocaDpaDevCompletion.getCompletionType(e) | (long) DocaDpaDevCompletion.completionElementGetSwqeOpcode(e) << 8
                | (DocaDpaDevCompletion.getCompletionImmediate(e) & 0xffffffffL) << 16);
        Dpa.st64(l + L_QPN, DocaDpaDevCompletion.completionElementGetQpn(e));
        Dpa.st64(l + L_WQE_COUNTER, DocaDpaDevCompletion.completionElementGetWqeCounter(e));
        Dpa.st64(l + L_BYTES, DocaDpaDevCompletion.completionElementGetReceivedBytes(e));
        DocaDpaDevCompletion.completionAck(comp, 1);
        Dpa.memoryWriteback(); // the record, for the host's d2h copy
        return 0;
    }
}
