package org.peerdirect.doca.rdma.progs;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.dev.DocaDpaDevRdma;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The DOCA RDMA tests' DPA application: DOCA's {@code dpa_initiator_target} sample (DPA_MODEL.md
 * §4 scenario 6) with its two threads and two RPCs. Where the C sample keeps globals, the thread's
 * argument block holds them (words of 8 bytes at the {@code T1_*} offsets), and each activation
 * records what it read so the host can check it: per receive {@code n}, the completion's type,
 * immediate, user data and the value at {@link #T1_LOG} + 32 n.
 */
@DpaApp("doca_rdma_tests")
public final class RdmaProgs {

    /** Thread 1's argument block: handles, the receive buffer, the state, the record. */
    public static final int T1_COMP = 0, T1_NOTIFY = 8, T1_RDMA = 16, T1_MMAP = 24, T1_BUF = 32, T1_LEN = 40, T1_REQUEST = 48,
            T1_NUM = 56, T1_VALUES = 64, T1_LOG = 128, T1_SIZE = T1_LOG + 32 * 8;
    /** Expected receives ({@code EXPECTED_NUM_RECEIVES}). */
    public static final int EXPECTED = 4;
    /** The process error a thread-1 activation without a completion ends with. */
    public static final int ERROR_NO_COMPLETION = 0x95;

    private RdmaProgs() {
    }

    /**
     * {@code thread1_kernel}: one completion per activation; records it, counts the value; after
     * the 4th notifies thread 2 and finishes; else re-posts the receive, acknowledges and requests
     * notification (unless the block's {@code T1_REQUEST} is 0: the mutant) and reschedules.
     */
    @DpaGlobal
    static void thread1(long a) {
        long comp = Dpa.ld64(a + T1_COMP);
        long e = DocaDpaDevCompletion.getCompletion(comp);
        if (e == 0) {
            FlexioDev.error(ERROR_NO_COMPLETION);
        }
        long n = Dpa.ld64(a + T1_NUM);
        long value = Dpa.ld64(Dpa.ld64(a + T1_BUF));
        long rec = a + T1_LOG + 32 * n;
        Dpa.st64(rec, DocaDpaDevCompletion.getCompletionType(e));
        Dpa.st64(rec + 8, DocaDpaDevCompletion.getCompletionImmediate(e) & 0xffffffffL);
        Dpa.st64(rec + 16, DocaDpaDevCompletion.getCompletionUserData(e) & 0xffffffffL);
        Dpa.st64(rec + 24, value);
        if (value >= 1 && value <= EXPECTED) {
            long slot = a + T1_VALUES + 8 * (value - 1);
            Dpa.st64(slot, Dpa.ld64(slot) + 1);
        }
        n++;
        Dpa.st64(a + T1_NUM, n);
        DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_INFO, "thread1_kernel: a receive completion");
        if (n == EXPECTED) {
            Dpa.memoryWriteback(); // the record, for the host's d2h copy (a NIC read)
            DocaDpaDev.threadNotify(Dpa.ld64(a + T1_NOTIFY));
            DocaDpaDev.threadFinish();
        }
        DocaDpaDevRdma.postReceive(Dpa.ld64(a + T1_RDMA), (int) Dpa.ld64(a + T1_MMAP), Dpa.ld64(a + T1_BUF), Dpa.ld64(a + T1_LEN));
        DocaDpaDevCompletion.completionAck(comp, 1);
        if (Dpa.ld64(a + T1_REQUEST) != 0) {
            DocaDpaDevCompletion.completionRequestNotification(comp);
        }
        DocaDpaDev.threadReschedule();
    }

    /** Thread 2's argument block: the sync event's DPA handle, the value to set, its activations. */
    public static final int T2_EVENT = 0, T2_COUNT = 8, T2_RUNS = 16, T2_SIZE = 24;

    /** {@code thread2_kernel}: counts its run, sets the sync event to the count, finishes. */
    @DpaGlobal
    static void thread2(long a) {
        Dpa.st64(a + T2_RUNS, Dpa.ld64(a + T2_RUNS) + 1);
        Dpa.memoryWriteback(); // the count, for the host's d2h copy (a NIC read)
        DocaDpaDevSyncEvent.updateSet(Dpa.ld64(a + T2_EVENT), Dpa.ld64(a + T2_COUNT));
        DocaDpaDev.threadFinish();
    }

    /** {@code rdma_post_receive_rpc}: the first receive on the target. */
    @DpaRpc
    static long postReceive(long rdma, long buf, int mmap, long length) {
        DocaDpaDevRdma.postReceive(rdma, mmap, buf, length);
        return 0;
    }

    /** {@code rdma_post_send_imm_rpc}: a send with immediate on the initiator, flushed, no completion of its own. */
    @DpaRpc
    static long postSendImm(long rdma, int connectionId, long buf, int mmap, long length, int immediate) {
        DocaDpaDevRdma.postSendImm(rdma, connectionId, mmap, buf, length, immediate,
                DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
        return 0;
    }

    /** An RDMA write from the DPA, flushed, reported: the write's SEND completion goes to the completion context. */
    @DpaRpc
    static long postWrite(long rdma, int connectionId, int dstMmap, long dst, int srcMmap, long src, long length, int flags) {
        DocaDpaDevRdma.postWrite(rdma, connectionId, dstMmap, dst, srcMmap, src, length, flags);
        return 0;
    }

    /** Polls one completion (the host's look at a completion context no thread consumes): its type, or -1 when none. */
    @DpaRpc
    static long pollOne(long comp) {
        long e = DocaDpaDevCompletion.getCompletion(comp);
        if (e == 0) {
            return -1;
        }
        long t = DocaDpaDevCompletion.getCompletionType(e);
        DocaDpaDevCompletion.completionAck(comp, 1);
        return t;
    }

    /** {@link #postLoop}'s block: stop word, RDMA handle, the ranks' connections, map key and address, start barrier, the ranks' post counts. */
    public static final int PL_STOP = 0, PL_RDMA = 8, PL_CONN = 16, PL_KEY = 32, PL_ADDR = 40, PL_BARRIER = 48, PL_POSTS = 56, PL_SIZE = 72;

    /**
     * Check C8's RDMA litmus: after a start barrier each rank posts 8-byte writes on its connection
     * of the handle ({@code PL_CONN + 8 rank}), never flushed (the WQEs stay in DPA memory: no
     * doorbell, nothing on the wire), counting them, until the host writes the stop word. Both
     * ranks on one connection is the mutant; one connection each is silent.
     */
    @DpaGlobal
    static void postLoop(long b) {
        int rank = DocaDpaDev.threadRank();
        long rdma = Dpa.ld64(b + PL_RDMA);
        int conn = (int) Dpa.ld64(b + PL_CONN + 8L * rank);
        int key = (int) Dpa.ld64(b + PL_KEY);
        long addr = Dpa.ld64(b + PL_ADDR);
        Dpa.amoAdd64(b + PL_BARRIER, 1);
        while (Dpa.ld64(b + PL_BARRIER) < DocaDpaDev.numThreads()) {
            Dpa.compilerBarrier();
        }
        long n = 0;
        while (Dpa.ld64(b + PL_STOP) == 0) {
            DocaDpaDevRdma.postWrite(rdma, conn, key, addr, key, addr, 8, DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
            Dpa.st64(b + PL_POSTS + 8L * rank, ++n);
        }
    }

    /** Reads a word of DPA memory (the host's look at a counter a DPA thread is writing). */
    @DpaRpc
    static long load64(long daddr) {
        return Dpa.ld64(daddr);
    }

    // ------------------------------------------------------------------ dpa_ping_pong (scenario 7)

    /** A ping-pong thread's argument block (8-byte words). */
    public static final int PP_COMP = 0, PP_RDMA = 8, PP_RECV = 16, PP_RECV_MMAP = 24, PP_RECV_LEN = 32, PP_SEND = 40, PP_SEND_MMAP = 48,
            PP_SEND_LEN = 56, PP_EVENT = 64, PP_EVENT_VAL = 72, PP_SIZE = 80;
    /** A ping-pong thread's local storage: its received-values array (u32 each), receives so far, whether it is the ping thread. */
    public static final int TLS_VALUES = 0, TLS_NUM = 8, TLS_IS_PING = 16, TLS_NO_REPOST = 24, TLS_SIZE = 32;
    /** Iterations ({@code EXPECTED_NUM_RECEIVES}). */
    public static final int ITERATIONS = 100;

    /**
     * {@code thread_kernel} of {@code dpa_ping_pong}: polls its completion context without
     * rescheduling; per receive marks the value received, re-posts the receive, sends its next
     * value (flushed, no report of its own); after the 100th sets its sync event and finishes.
     */
    @DpaGlobal
    static void pingPong(long a) {
        long tls = DocaDpaDev.threadGetLocalStorage();
        long values = Dpa.ld64(tls + TLS_VALUES);
        boolean ping = Dpa.ld64(tls + TLS_IS_PING) != 0;
        long comp = Dpa.ld64(a + PP_COMP);
        long rdma = Dpa.ld64(a + PP_RDMA);
        long send = Dpa.ld64(a + PP_SEND);
        while (true) {
            if (DocaDpaDevCompletion.getCompletion(comp) == 0) {
                continue;
            }
            long num = Dpa.ld64(tls + TLS_NUM) + 1;
            Dpa.st64(tls + TLS_NUM, num);
            long v = Dpa.ld64(Dpa.ld64(a + PP_RECV));
            if (v >= 0 && v < ITERATIONS) {
                Dpa.st32(values + 4 * v, 1);
            }
            if (Dpa.ld64(tls + TLS_NO_REPOST) == 0) { // the mutant does not re-post its receive
                DocaDpaDevRdma.postReceive(rdma, (int) Dpa.ld64(a + PP_RECV_MMAP), Dpa.ld64(a + PP_RECV), Dpa.ld64(a + PP_RECV_LEN));
            }
            if (ping) { // the RPC sent the first value: the next one before this send
                Dpa.st64(send, Dpa.ld64(send) + 1);
            }
            DocaDpaDevRdma.postSend(rdma, 0, (int) Dpa.ld64(a + PP_SEND_MMAP), send, Dpa.ld64(a + PP_SEND_LEN),
                    DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
            if (num == ITERATIONS) {
                Dpa.memoryWriteback(); // the array, for the host's d2h copy (a NIC read)
                DocaDpaDevSyncEvent.updateSet(Dpa.ld64(a + PP_EVENT), Dpa.ld64(a + PP_EVENT_VAL));
                DocaDpaDev.threadFinish();
            }
            if (!ping) { // this send was the value received first: the next one after it
                Dpa.st64(send, Dpa.ld64(send) + 1);
            }
            DocaDpaDevCompletion.completionAck(comp, 1);
        }
    }

    /** {@code trigger_first_iteration_rpc}: both first receives, and ping's first send (value 0). */
    @DpaRpc
    static long triggerFirstIteration(long pingArg, long pongArg) {
        DocaDpaDevRdma.postReceive(Dpa.ld64(pingArg + PP_RDMA), (int) Dpa.ld64(pingArg + PP_RECV_MMAP), Dpa.ld64(pingArg + PP_RECV),
                Dpa.ld64(pingArg + PP_RECV_LEN));
        DocaDpaDevRdma.postReceive(Dpa.ld64(pongArg + PP_RDMA), (int) Dpa.ld64(pongArg + PP_RECV_MMAP), Dpa.ld64(pongArg + PP_RECV),
                Dpa.ld64(pongArg + PP_RECV_LEN));
        DocaDpaDevRdma.postSend(Dpa.ld64(pingArg + PP_RDMA), 0, (int) Dpa.ld64(pingArg + PP_SEND_MMAP), Dpa.ld64(pingArg + PP_SEND),
                Dpa.ld64(pingArg + PP_SEND_LEN), DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
        return 0;
    }

    /**
     * A hand-made post of a SEND on connection 0 through the RDMA handle's published layout, as
     * {@code doca_dpa_dev_rdma_post_send} makes it but without {@code __dpa_thread_memory_writeback}
     * before the doorbell: the memory model's mutant (C1 when the NIC fetches the WQE).
     */
    @DpaRpc
    static long postSendWithoutWriteback(long rdma, int mmap, long addr, long length) {
        long c = rdma + DocaDpaDevRdma.OFF_CONN;
        int qpn = Dpa.ld32(c + DocaDpaDevRdma.C_QPN);
        int pi = Dpa.ld32(c + DocaDpaDevRdma.C_SQ_PI);
        long sq = Dpa.ld64(c + DocaDpaDevRdma.C_WQ) + ((long) DocaDpaDevRdma.RQ_STRIDE << Dpa.ld32(c + DocaDpaDevRdma.C_LOG_RQ));
        long wqe = org.peerdirect.flexio.dev.FlexioDevQueue.swqeAt(sq, pi, Dpa.ld32(c + DocaDpaDevRdma.C_LOG_SQ));
        org.peerdirect.flexio.dev.FlexioDevQueue.swqeSegCtrlSet(wqe, pi, qpn, 0, org.peerdirect.flexio.dev.FlexioDevQueue.OPCODE_SEND, 2, 0);
        org.peerdirect.flexio.dev.FlexioDevQueue.swqeSegMemPtrDataSet(wqe + org.peerdirect.flexio.dev.FlexioDevQueue.SEG_SIZE, (int) length, mmap, addr);
        Dpa.st32(c + DocaDpaDevRdma.C_SQ_PI, pi + 1);
        FlexioDev.outboxConfig(Dpa.ld32(rdma + DocaDpaDevRdma.OFF_OUTBOX));
        FlexioDev.qpSqRingDb(pi + 1, qpn);
        return 0;
    }

    /** {@code len} bytes written on connection 0 (not flushed, no report), then the remote event set to {@code count} ({@code signal_set}). */
    @DpaRpc
    static long writeThenSignalSet(long rdma, int dstMmap, long dst, int srcMmap, long src, long length, long event, long count) {
        DocaDpaDevRdma.postWrite(rdma, 0, dstMmap, dst, srcMmap, src, length, DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
        DocaDpaDevRdma.signalSet(rdma, 0, event, count);
        return 0;
    }

    /** {@code signal_add} of {@code count} on connection 0. */
    @DpaRpc
    static long signalAdd(long rdma, long event, long count) {
        DocaDpaDevRdma.signalAdd(rdma, 0, event, count);
        return 0;
    }

    // ------------------------------------------------------------------ dpa_all_to_all (scenario 9)

    /**
     * A rank's argument block (8-byte words): its DOCA RDMA handle, its send and receive matrices
     * (R blocks of {@code A_BLOCK} bytes each, block i of the send matrix for rank i, block i of the
     * receive matrix from rank i), the send matrix's map handle, R, its rank, the sequence number
     * of this call, the mutant switch; then per rank i a {@code P_SIZE} record at {@code A_PEERS}.
     */
    public static final int A_RDMA = 0, A_SEND = 8, A_SEND_MMAP = 16, A_RECV = 24, A_BLOCK = 32, A_RANKS = 40, A_ME = 48, A_SEQ = 56,
            A_MUTANT = 64, A_PEERS = 72;
    /**
     * Per peer: the connection to it, its receive matrix (address, map handle as imported here),
     * the local sync event it signals (DPA handle) and its event this rank signals (remote net handle).
     */
    public static final int P_CONN = 0, P_RECV = 8, P_RECV_MMAP = 16, P_LOCAL_EVENT = 24, P_REMOTE_EVENT = 32, P_SIZE = 40;
    /** The mutant: {@code signal_set} posted before the write, whose post is not flushed (the signal's flush came first). */
    public static final int MUTANT_SIGNAL_BEFORE_WRITE = 1;

    /** The argument block's size for {@code ranks} ranks. */
    public static int allToAllSize(int ranks) {
        return A_PEERS + P_SIZE * ranks;
    }

    /**
     * {@code alltoall_kernel} of DOCA's {@code dpa_all_to_all}: thread t of the kernel's threads takes
     * the peers t, t + nthreads, ...; for each it writes this rank's block for the peer into the
     * peer's receive matrix at this rank's row (flushed, no report) and then sets the peer's sync
     * event for this rank to the sequence number on the same connection (the RC queue executes in
     * order: the peer that sees the value sees the block); then waits until each of its peers' events
     * here passed seq - 1. [model] One DOCA RDMA context per rank with a connection per peer (the
     * application has one context per peer); the rank's own block is copied on the DPA.
     */
    @DpaGlobal
    static void allToAll(long a) {
        int t = DocaDpaDev.threadRank();
        int nt = DocaDpaDev.numThreads();
        long rdma = Dpa.ld64(a + A_RDMA);
        long block = Dpa.ld64(a + A_BLOCK);
        long ranks = Dpa.ld64(a + A_RANKS);
        long me = Dpa.ld64(a + A_ME);
        long seq = Dpa.ld64(a + A_SEQ);
        boolean mutant = Dpa.ld64(a + A_MUTANT) == MUTANT_SIGNAL_BEFORE_WRITE;
        int srcMmap = (int) Dpa.ld64(a + A_SEND_MMAP);
        for (long i = t; i < ranks; i += nt) {
            long src = Dpa.ld64(a + A_SEND) + i * block;
            if (i == me) {
                long dst = Dpa.ld64(a + A_RECV) + me * block;
                for (long off = 0; off < block; off += 8) {
                    Dpa.st64(dst + off, Dpa.ld64(src + off));
                }
                Dpa.memoryWriteback(); // the block, for the host's d2h copy (a NIC read)
                continue;
            }
            long p = a + A_PEERS + P_SIZE * i;
            int conn = (int) Dpa.ld64(p + P_CONN);
            int dstMmap = (int) Dpa.ld64(p + P_RECV_MMAP);
            long dst = Dpa.ld64(p + P_RECV) + me * block;
            long event = Dpa.ld64(p + P_REMOTE_EVENT);
            if (mutant) {
                DocaDpaDevRdma.signalSet(rdma, conn, event, seq);
                DocaDpaDevRdma.postWrite(rdma, conn, dstMmap, dst, srcMmap, src, block, DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
            } else {
                DocaDpaDevRdma.postWrite(rdma, conn, dstMmap, dst, srcMmap, src, block,
                        DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS | DocaDpaDevRdma.SUBMIT_FLAG_FLUSH);
                DocaDpaDevRdma.signalSet(rdma, conn, event, seq);
            }
        }
        for (long i = t; i < ranks; i += nt) {
            if (i != me) {
                DocaDpaDevSyncEvent.waitGt(Dpa.ld64(a + A_PEERS + P_SIZE * i + P_LOCAL_EVENT), seq - 1, -1L);
            }
        }
    }
}
