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

    /**
     * DOCA's manual polling by a kernel: {@code doca_dpa_dev_get_completion} on the completion
     * context at {@code b} (a context with no thread) until one arrives; its type at {@code b + 8},
     * its user data at {@code b + 16}, then acknowledged.
     */
    @DpaGlobal
    static void pollKernel(long b) {
        long comp = Dpa.ld64(b);
        long e;
        while ((e = DocaDpaDevCompletion.getCompletion(comp)) == 0) {
            Dpa.compilerBarrier();
        }
        Dpa.st64(b + 8, DocaDpaDevCompletion.getCompletionType(e));
        Dpa.st64(b + 16, DocaDpaDevCompletion.getCompletionUserData(e));
        DocaDpaDevCompletion.completionAck(comp, 1);
        Dpa.memoryWriteback(); // the host reads the results through the NIC
    }

    /** {@link #postLoop}'s block: stop word, RDMA handle, the ranks' connections, map key and address, start barrier, the ranks' post counts. */
    public static final int PL_STOP = 0, PL_RDMA = 8, PL_CONN = 16, PL_KEY = 32, PL_ADDR = 40, PL_BARRIER = 48, PL_POSTS = 56, PL_SIZE = 72;

    /**
     * Check C8's RDMA litmus: after a start barrier each rank posts 8-byte writes on its connection
     * of the handle ({@code PL_CONN + 8 rank}), never flushed (the WQEs stay in DPA memory: no
     * doorbell, nothing on the wire), counting them, until the host writes the stop word. Both
     * ranks on one connection is the mutant; one connection each is silent. A rank whose
     * connection is -1 posts receives on the handle instead ({@code post_receive} names no
     * connection; no message comes, so the receive queue's WQEs are only rewritten): two such
     * ranks are the receive mutant, a receiving rank beside a writing one is silent.
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
            if (conn < 0) {
                DocaDpaDevRdma.postReceive(rdma, key, addr, 8);
            } else {
                DocaDpaDevRdma.postWrite(rdma, conn, key, addr, key, addr, 8, DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
            }
            Dpa.st64(b + PL_POSTS + 8L * rank, ++n);
        }
    }

    /** Reads a word of DPA memory (the host's look at a counter a DPA thread is writing). */
    @DpaRpc
    static long load64(long daddr) {
        return Dpa.ld64(daddr);
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

    /** A send doorbell of connection 0 at producer index {@code pi}, rung by hand (a poster out of order). */
    @DpaRpc
    static long ringSq(long rdma, int pi) {
        FlexioDev.outboxConfig(Dpa.ld32(rdma + DocaDpaDevRdma.OFF_OUTBOX));
        FlexioDev.qpSqRingDb(pi, Dpa.ld32(rdma + DocaDpaDevRdma.OFF_CONN + DocaDpaDevRdma.C_QPN));
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
}
