package org.peerdirect.doca.dpa.progs;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The DOCA DPA tests' application (DPA_MODEL.md §4 scenario 5: the {@code dpa_kernel_launch}
 * sample and Seed 001's three-kernel chain), built by dpacc with doca-dpa-dev linked in.
 *
 * <p>Records are blocks in the DPA heap the host reads back by {@link #load64}: a kernel's record
 * is {@code [0]} ranks ended, {@code [1]} ranks started, then one word per rank holding
 * {@code num_threads * 1000 + rank + 1}.
 */
@DpaApp("doca_dpa_kernels")
public final class KernelProgs {

    private KernelProgs() {
    }

    /** {@code hello_world}: each rank writes its word, then counts itself ended. */
    @DpaGlobal
    static void helloWorld(long record) {
        int rank = DocaDpaDev.threadRank();
        int n = DocaDpaDev.numThreads();
        DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_INFO, "Hello from kernel");
        DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_DEBUG, "debug line of hello_world");
        Dpa.amoAdd64(record + 8, 1);
        Dpa.st64(record + 16 + 8L * rank, n * 1000L + rank + 1);
        Dpa.memoryFence(Dpa.W, Dpa.W);
        Dpa.amoAdd64(record, 1);
    }

    /**
     * A kernel whose ranks start, then wait until the host writes a non-zero gate word (at
     * {@code record + 512}) before they end: the completion event must not move while they wait.
     */
    /** {@link #waitSeen}'s block: the wait event's DPA handle, the launch's threshold, starts seen too early, starts. */
    public static final int WS_EVENT = 0, WS_THRESHOLD = 8, WS_EARLY = 16, WS_RUNS = 24, WS_SIZE = 32;

    /**
     * A kernel that reads its own wait event at its start (GT comparison): a value not past its
     * threshold means it started before its event passed (values only rise in the test using it).
     */
    @DpaGlobal
    static void waitSeen(long b) {
        long v = DocaDpaDevSyncEvent.get(Dpa.ld64(b + WS_EVENT));
        if (Long.compareUnsigned(v, Dpa.ld64(b + WS_THRESHOLD)) <= 0) {
            Dpa.amoAdd64(b + WS_EARLY, 1);
        }
        Dpa.amoAdd64(b + WS_RUNS, 1);
    }

    @DpaGlobal
    static void gated(long record) {
        int rank = DocaDpaDev.threadRank();
        Dpa.amoAdd64(record + 8, 1);
        while (Dpa.ld64(record + 512) == 0) {
            Dpa.compilerBarrier(); // the host's h2d write reaches DPA memory through the NIC: coherent
        }
        Dpa.st64(record + 16 + 8L * rank, DocaDpaDev.numThreads() * 1000L + rank + 1);
        Dpa.memoryFence(Dpa.W, Dpa.W);
        Dpa.amoAdd64(record, 1);
    }

    /** Seed 001's chain: func1..3 append their number to the log at {@code log} ([0] count, then entries). */
    @DpaGlobal
    static void func1(long log) {
        append(log, 1);
    }

    @DpaGlobal
    static void func2(long log) {
        append(log, 2);
    }

    @DpaGlobal
    static void func3(long log) {
        append(log, 3);
    }

    static void append(long log, long id) {
        long slot = Dpa.amoAdd64(log, 1);
        Dpa.st64(log + 8 + 8 * slot, id);
    }

    /** Where a record holds a sync event's DPA handle (written by the host). */
    public static final int HANDLE = 520;

    /** Each rank adds 1 to the event whose handle the record holds ({@code doca_dpa_dev_sync_event_update_add}). */
    @DpaGlobal
    static void countOn(long record) {
        DocaDpaDevSyncEvent.updateAdd(Dpa.ld64(record + HANDLE), 1);
    }

    /** How many adds each rank of {@link #countOnMany} makes. */
    public static final int MANY = 40;

    /** Each rank adds 1 to the event {@link #MANY} times, a rank-dependent step between adds (the adds of ranks interleave). */
    @DpaGlobal
    static void countOnMany(long record) {
        long h = Dpa.ld64(record + HANDLE);
        for (int i = 0; i < MANY; i++) {
            DocaDpaDevSyncEvent.updateAdd(h, 1);
            Dpa.amoAdd64(record + 8, DocaDpaDev.threadRank() + 1L);
        }
    }

    /** Each rank counts itself started, waits until the event passes 4 ({@code wait_gt}), then reads it and counts itself ended. */
    @DpaGlobal
    static void waitOn(long record) {
        long h = Dpa.ld64(record + HANDLE);
        Dpa.amoAdd64(record + 8, 1);
        DocaDpaDevSyncEvent.waitGt(h, 4, -1L);
        Dpa.st64(record + 16 + 8L * DocaDpaDev.threadRank(), DocaDpaDevSyncEvent.get(h));
        Dpa.memoryFence(Dpa.W, Dpa.W);
        Dpa.amoAdd64(record, 1);
    }

    /**
     * A DPA thread (DOCA's nvqual shape): writes its EU + 1 into its local storage's first word,
     * counts its activations in the second, adds 1 to the event whose handle is its argument, and
     * finishes.
     */
    @DpaGlobal
    static void euWorker(long eventHandle) {
        long ls = DocaDpaDev.threadGetLocalStorage();
        Dpa.st64(ls, Dpa.threadCtx().eu() + 1L);
        Dpa.amoAdd64(ls + 8, 1);
        DocaDpaDevSyncEvent.updateAdd(eventHandle, 1);
        DocaDpaDev.threadFinish();
    }

    /** Notifies the {@code n} notification completions whose handles are at {@code handles} ({@code doca_dpa_dev_thread_notify}). */
    @DpaRpc
    static long notifyAll(long handles, int n) {
        for (int i = 0; i < n; i++) {
            DocaDpaDev.threadNotify(Dpa.ld64(handles + 8L * i));
        }
        return n;
    }

    /** {@link #pollCompletion}'s block: stop word, the ranks' completion handles, their poll counts, the start barrier. */
    public static final int POLL_STOP = 0, POLL_HANDLES = 8, POLL_COUNTS = 24, POLL_BARRIER = 40, POLL_SIZE = 64;

    /**
     * Check C8's litmus: each rank polls the completion context whose handle is its word of
     * {@code POLL_HANDLES} ({@code doca_dpa_dev_get_completion}, as DOCA's busy-polling samples
     * do) and counts its polls, until the host writes a non-zero stop word. The ranks first meet
     * at a barrier, so they poll at the same time. One handle for both is the mutant (two harts in
     * one non-thread-safe object); one each is the fixed program.
     */
    @DpaGlobal
    static void pollCompletion(long block) {
        int rank = DocaDpaDev.threadRank();
        long comp = Dpa.ld64(block + POLL_HANDLES + 8L * rank);
        Dpa.amoAdd64(block + POLL_BARRIER, 1);
        while (Dpa.ld64(block + POLL_BARRIER) < DocaDpaDev.numThreads()) {
            Dpa.compilerBarrier();
        }
        long polls = 0;
        while (Dpa.ld64(block + POLL_STOP) == 0) {
            DocaDpaDevCompletion.getCompletion(comp);
            Dpa.st64(block + POLL_COUNTS + 8L * rank, ++polls);
        }
    }

    /** Reads a word of DPA memory (the tests' d2h: doca_dpa_d2h_memcpy is not built). */
    @DpaRpc
    static long load64(long daddr) {
        return Dpa.ld64(daddr);
    }

    /** {@code doca_dpa_dev_sync_event_update_set} from an RPC; 0. */
    @DpaRpc
    static long eventSet(long handle, long value) {
        DocaDpaDevSyncEvent.updateSet(handle, value);
        return 0;
    }

    /** {@code doca_dpa_dev_sync_event_update_add} from an RPC; 0. */
    @DpaRpc
    static long eventAdd(long handle, long value) {
        DocaDpaDevSyncEvent.updateAdd(handle, value);
        return 0;
    }

    /** {@code doca_dpa_dev_sync_event_get} from an RPC. */
    @DpaRpc
    static long eventGet(long handle) {
        return DocaDpaDevSyncEvent.get(handle);
    }

    /** The DS RPC sample's shape: a result from arguments. */
    @DpaRpc
    static long add(long a, long b) {
        return a + b;
    }
}
