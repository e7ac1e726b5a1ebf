package org.peerdirect.doca.dpa.progs;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevAsyncOps;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.doca.dpa.dev.DocaDpaDevTrace;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The async ops and trace tests' DPA application. {@link #copier} is a DPA thread that posts
 * {@code n} copies of {@code len} bytes (copy {@code i} from {@code src + i * len} to
 * {@code dst + i * len}), then polls its completion context in the same activation until every
 * copy is covered by a completion (DOCA's continuation pattern A), recording each completion, and
 * sets the done event. Its argument block ({@code A_*}, words of 8 bytes) holds the handles, the
 * plan and the record: per completion {@code n}, at {@link #A_LOG} + 32 n, its type, user data,
 * error syndrome and WQE counter.
 */
@DpaApp("doca_dpa_async")
public final class AsyncProgs {

    public static final int A_AOPS = 0, A_COMP = 8, A_N = 16, A_MODE = 24, A_DST_MMAP = 32, A_DST = 40, A_SRC_MMAP = 48, A_SRC = 56,
            A_LEN = 64, A_EVENT = 72, A_NCOMP = 80, A_TIMED_OUT = 88, A_LOG = 128, A_SIZE = A_LOG + 32 * 64;
    /** Every copy flushed and reported: one completion each. */
    public static final int MODE_EACH = 0;
    /** Every copy but the last with OPTIMIZE_REPORTS and not flushed, the last flushed and reported: one completion for the batch. */
    public static final int MODE_BATCH = 1;
    /** Polls of the completion context before the thread gives up (a copy the NIC never completes must not hang the test). */
    static final long POLL_BOUND = 20_000_000L;

    private AsyncProgs() {
    }

    /** The thread: posts, polls, records, sets the done event, finishes. */
    @DpaGlobal
    static void copier(long a) {
        long aops = Dpa.ld64(a + A_AOPS);
        long comp = Dpa.ld64(a + A_COMP);
        long n = Dpa.ld64(a + A_N);
        long len = Dpa.ld64(a + A_LEN);
        boolean batch = Dpa.ld64(a + A_MODE) == MODE_BATCH;
        for (long i = 0; i < n; i++) {
            boolean last = i == n - 1;
            int flags = batch && !last ? DocaDpaDevAsyncOps.SUBMIT_FLAG_OPTIMIZE_REPORTS : DocaDpaDevAsyncOps.SUBMIT_FLAG_FLUSH;
            DocaDpaDevAsyncOps.postMemcpy(aops, (int) Dpa.ld64(a + A_DST_MMAP), Dpa.ld64(a + A_DST) + i * len, (int) Dpa.ld64(a + A_SRC_MMAP),
                    Dpa.ld64(a + A_SRC) + i * len, len, flags);
        }
        long got = 0;
        long polls = 0;
        while (DocaDpaDevAsyncOps.outstanding(aops) != 0 && polls < POLL_BOUND) {
            long e = DocaDpaDevCompletion.getCompletion(comp);
            polls++;
            if (e == 0) {
                continue;
            }
            long rec = a + A_LOG + 32 * (got & 63);
            Dpa.st64(rec, DocaDpaDevCompletion.getCompletionType(e));
            Dpa.st64(rec + 8, DocaDpaDevCompletion.getCompletionUserData(e) & 0xffffffffL);
            Dpa.st64(rec + 16, DocaDpaDevCompletion.completionElementGetErrorSyndrome(e));
            Dpa.st64(rec + 24, DocaDpaDevCompletion.completionElementGetWqeCounter(e));
            DocaDpaDevCompletion.completionAck(comp, 1);
            got++;
        }
        Dpa.st64(a + A_NCOMP, got);
        Dpa.st64(a + A_TIMED_OUT, polls >= POLL_BOUND ? 1 : 0);
        Dpa.memoryWriteback(); // the record, for the host's d2h copy (a NIC read)
        DocaDpaDevSyncEvent.updateSet(Dpa.ld64(a + A_EVENT), 1);
        DocaDpaDev.threadFinish();
    }

    /** Copies posted so far by {@link #chained}. */
    public static final int A_POSTED = 96;

    /**
     * DOCA's continuation pattern B: each activation takes the completion that triggered it (none on
     * the first, a notification), records it, then posts the next copy (flushed, reported),
     * requests notification and reschedules; after the {@code n}-th completion it sets the done
     * event and finishes. The thread runs {@code n + 1} times, each completion waking it.
     */
    @DpaGlobal
    static void chained(long a) {
        long aops = Dpa.ld64(a + A_AOPS);
        long comp = Dpa.ld64(a + A_COMP);
        long got = Dpa.ld64(a + A_NCOMP);
        long e = DocaDpaDevCompletion.getCompletion(comp);
        if (e != 0) {
            long rec = a + A_LOG + 32 * (got & 63);
            Dpa.st64(rec, DocaDpaDevCompletion.getCompletionType(e));
            Dpa.st64(rec + 8, DocaDpaDevCompletion.getCompletionUserData(e) & 0xffffffffL);
            Dpa.st64(rec + 16, DocaDpaDevCompletion.completionElementGetErrorSyndrome(e));
            Dpa.st64(rec + 24, DocaDpaDevCompletion.completionElementGetWqeCounter(e));
            DocaDpaDevCompletion.completionAck(comp, 1);
            got++;
            Dpa.st64(a + A_NCOMP, got);
        }
        long posted = Dpa.ld64(a + A_POSTED);
        if (got == Dpa.ld64(a + A_N)) {
            Dpa.memoryWriteback(); // the record, for the host's d2h copy (a NIC read)
            DocaDpaDevSyncEvent.updateSet(Dpa.ld64(a + A_EVENT), 1);
            DocaDpaDev.threadFinish();
        }
        if (posted == got) {
            long len = Dpa.ld64(a + A_LEN);
            Dpa.st64(a + A_POSTED, posted + 1);
            DocaDpaDevAsyncOps.postMemcpy(aops, (int) Dpa.ld64(a + A_DST_MMAP), Dpa.ld64(a + A_DST) + posted * len,
                    (int) Dpa.ld64(a + A_SRC_MMAP), Dpa.ld64(a + A_SRC) + posted * len, len, DocaDpaDevAsyncOps.SUBMIT_FLAG_FLUSH);
        }
        DocaDpaDevCompletion.completionRequestNotification(comp);
        DocaDpaDev.threadReschedule();
    }

    /** Triggers a thread through its notification completion (the first activation). */
    @DpaRpc
    static long notify(long handle) {
        DocaDpaDev.threadNotify(handle);
        return 0;
    }

    /** One copy from an RPC, flushed and reported (the bad-input tests: its checks end the process). */
    @DpaRpc
    static long postOne(long aops, int dstMmap, long dst, int srcMmap, long src, long len) {
        DocaDpaDevAsyncOps.postMemcpy(aops, dstMmap, dst, srcMmap, src, len, DocaDpaDevAsyncOps.SUBMIT_FLAG_FLUSH);
        return 0;
    }

    /**
     * A copy posted by hand through the ops' published layout, as {@code doca_dpa_dev_post_memcpy}
     * makes it but without {@code __dpa_thread_memory_writeback} before the doorbell: the memory
     * model's mutant (C1 when the NIC fetches the WQE).
     */
    @DpaRpc
    static long postWithoutWriteback(long aops, int dstMmap, long dst, int srcMmap, long src, long len) {
        int qpn = Dpa.ld32(aops + DocaDpaDevAsyncOps.OFF_QPN);
        int pi = Dpa.ld32(aops + DocaDpaDevAsyncOps.OFF_SQ_PI);
        long wqe = FlexioDevQueue.swqeAt(Dpa.ld64(aops + DocaDpaDevAsyncOps.OFF_SQ), pi, Dpa.ld32(aops + DocaDpaDevAsyncOps.OFF_LOG_SQ));
        FlexioDevQueue.swqeSegCtrlSet(wqe, pi, qpn, FlexioDevQueue.CTRL_CQ_UPDATE, FlexioDevQueue.OPCODE_RDMA_WRITE, 3, 0);
        FlexioDevQueue.swqeSegRdmaSet(wqe + FlexioDevQueue.SEG_SIZE, dstMmap, dst);
        FlexioDevQueue.swqeSegMemPtrDataSet(wqe + 2 * FlexioDevQueue.SEG_SIZE, (int) len, srcMmap, src);
        Dpa.st32(aops + DocaDpaDevAsyncOps.OFF_SQ_PI, pi + 1);
        FlexioDev.outboxConfig(Dpa.ld32(aops + DocaDpaDevAsyncOps.OFF_OUTBOX));
        FlexioDev.qpSqRingDb(pi + 1, qpn);
        return 0;
    }

    /** External pointer thread's argument block: the host map's handle, the address, the done event. */
    public static final int E_MMAP = 0, E_ADDR = 8, E_EVENT = 16, E_WRITEBACK = 24, E_SIZE = 32;

    /**
     * Through {@code doca_dpa_dev_mmap_get_external_ptr}: reads the host's word at {@code addr},
     * stores it + 1 at {@code addr + 8}, writes the window back (unless {@code E_WRITEBACK} is 0:
     * the mutant), sets the done event, finishes.
     */
    @DpaGlobal
    static void extWriter(long a) {
        long p = DocaDpaDevAsyncOps.mmapGetExternalPtr((int) Dpa.ld64(a + E_MMAP), Dpa.ld64(a + E_ADDR));
        long v = Dpa.ld64(p);
        Dpa.st64(p + 8, v + 1);
        if (Dpa.ld64(a + E_WRITEBACK) != 0) {
            Dpa.windowWriteback();
        }
        DocaDpaDevSyncEvent.updateSet(Dpa.ld64(a + E_EVENT), 1);
        DocaDpaDev.threadFinish();
    }

    // ------------------------------------------------------------------ trace

    /** Trace thread's argument block: records to write, whether to flush at the end, the done event, a tag. */
    public static final int T_N = 0, T_FLUSH = 8, T_EVENT = 16, T_TAG = 24, T_SIZE = 32;

    /**
     * Writes {@code n} trace records {@code (tag + i, i + 1, i + 2, i + 3, i + 4)} ({@code i} from
     * 0), flushes if asked, adds 1 to the done event, finishes.
     */
    @DpaGlobal
    static void tracer(long a) {
        long n = Dpa.ld64(a + T_N);
        long tag = Dpa.ld64(a + T_TAG);
        for (long i = 0; i < n; i++) {
            DocaDpaDevTrace.trace(tag + i, i + 1, i + 2, i + 3, i + 4);
        }
        if (Dpa.ld64(a + T_FLUSH) != 0) {
            DocaDpaDevTrace.traceFlush();
        }
        DocaDpaDevSyncEvent.updateAdd(Dpa.ld64(a + T_EVENT), 1);
        DocaDpaDev.threadFinish();
    }
}
