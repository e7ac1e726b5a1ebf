package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The DPA half of DOCA DPA's kernel launch on the data path ([model], DPA_MODEL.md §2.5: NVIDIA's
 * runtime is not public): two runtime entries dpacc links into every image using doca-dpa-dev,
 * {@value #RANK_SYMBOL} (a rank thread's handler) and {@value #START_SYMBOL} (an RPC), and per
 * kernel {@code <kernel>}{@value #LAUNCH_SUFFIX}, the kernel as an RPC-kind trampoline that
 * {@code Dpa.call} can reach (a {@code __dpa_global__} itself cannot be called by symbol).
 *
 * <p>A launch control block in DPA memory (8-byte words, little-endian; host and DPA agree on it as
 * a C header shared by libdoca_dpa and libdoca_dpa_dev would say): the kernel's trampoline symbol
 * index, its argument, the number of ranks, the ranks ended (a DPA atomic), the completion
 * event's DPA handle (0: none), its value, set (0) or add (1), the wait words of
 * {@link DocaDpaDevKernelQueue} (wait event handle, threshold, comparison, host gate, queue
 * position + 1), the launches finished (a DPA atomic), the rank blocks' base (rank r's runtime
 * block, {@link DocaDpaDev#RANK_BLOCK_SIZE} bytes, its thread-local storage), then the rank
 * threads' ids from {@link #C_THREADS}. The host writes the launch's words (one copy) and queues
 * it for the DPA's dispatcher ({@link DocaDpaDevKernelQueue}, which starts it once its wait event
 * passed), or calls {@value #START_SYMBOL} (one WRITE-with-immediate) to start it at once: no
 * firmware command per launch.
 *
 * <p>Order: a rank's kernel writes come before its count (a W→W fence); the last rank reads the
 * completion words, then advances the finished count (an atomic: the block is free for the next
 * launch once it moved), then updates the completion event through its DPA handle (the sync
 * event's own fence first). So whoever sees the event moved sees every rank's work and the slot's
 * finished count already moved: a host that launches again at once finds the slot free. The event
 * may be a counter in DPA memory or, through the window, in host memory ({@link DocaDpaDevSyncEvent}).
 * One launch at a time per control block.
 */
public final class DocaDpaDevKernel {

    /** The rank thread's entry. */
    public static final String RANK_SYMBOL = "doca_dpa_dev_kernel_rank";
    /** The start RPC's entry. */
    public static final String START_SYMBOL = "doca_dpa_dev_kernel_start";
    /** A kernel's trampoline symbol: the kernel's symbol and this. */
    public static final String LAUNCH_SUFFIX = "__launch";
    /** Control block words. */
    public static final int C_KERNEL = 0, C_ARG = 8, C_NTHREADS = 16, C_ENDED = 24, C_COMP = 32, C_COMP_VALUE = 40, C_COMP_ADD = 48,
            C_WAIT = 56, C_WAIT_THRESHOLD = 64, C_WAIT_GE = 72, C_GATE = 80, C_QUEUED = 88, C_FINISHED = 96, C_RANK_BLOCKS = 104,
            C_THREADS = 112;
    /** The launch's words, {@link #C_KERNEL} up to {@link #C_FINISHED}: what the host writes per launch (one copy). */
    public static final int LAUNCH_WORDS = C_FINISHED;

    private DocaDpaDevKernel() {
    }

    /** The control block's size for a pool of {@code ranks} threads. */
    public static int controlSize(int ranks) {
        return C_THREADS + 8 * ranks;
    }

    /**
     * {@value #START_SYMBOL}: the launch's ranks get its thread count in their blocks and the ended
     * count is reset, then each rank thread is activated (the ISA's activation, no firmware
     * command). Returns the number of ranks started.
     */
    public static long kernelStart(long argbuf) {
        return startRanks(Dpa.ld64(argbuf));
    }

    /** The start of the launch in control block {@code c} (the start RPC's and the dispatcher's, {@link DocaDpaDevKernelQueue}); its rank count. */
    static long startRanks(long c) {
        int n = (int) Dpa.ld64(c + C_NTHREADS);
        long blocks = Dpa.ld64(c + C_RANK_BLOCKS);
        for (int r = 0; r < n; r++) {
            Dpa.st32(blocks + (long) r * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_NUM_THREADS, n);
        }
        Dpa.amoSwap64(c + C_ENDED, 0);
        Dpa.memoryFence(Dpa.RW, Dpa.RW); // the blocks and the count before any rank runs
        for (int r = 0; r < n; r++) {
            FlexioDev.eventHandlerActivate((int) Dpa.ld64(c + C_THREADS + 8L * r));
        }
        return n;
    }

    /** {@code doca_dpa_dev_kernel_dispatch}: the DPA's launch dispatcher thread ({@link DocaDpaDevKernelQueue#dispatchHandler}). */
    public static void dispatchHandler(long q) {
        DocaDpaDevKernelQueue.dispatchHandler(q);
    }

    /** {@code doca_dpa_dev_kernel_kick}: the RPC activating the dispatcher ({@link DocaDpaDevKernelQueue#kick}). */
    public static long kernelKick(long argbuf) {
        return DocaDpaDevKernelQueue.kick(argbuf);
    }

    /**
     * {@value #RANK_SYMBOL} (argument: the control block): calls the kernel through its trampoline,
     * counts the rank ended; the last rank advances the finished count, then moves the completion event.
     */
    public static void rankHandler(long c) {
        Dpa.call((int) Dpa.ld64(c + C_KERNEL), Dpa.ld64(c + C_ARG));
        Dpa.memoryFence(Dpa.RW, Dpa.W); // the kernel's accesses before the count
        long n = Dpa.ld64(c + C_NTHREADS);
        if (Dpa.amoAdd64(c + C_ENDED, 1) == n - 1) {
            long ev = Dpa.ld64(c + C_COMP); // read before the finished count frees the block for the next launch's words
            long value = Dpa.ld64(c + C_COMP_VALUE);
            boolean add = Dpa.ld64(c + C_COMP_ADD) != 0;
            Dpa.amoAdd64(c + C_FINISHED, 1);
            if (ev != 0) {
                if (add) {
                    DocaDpaDevSyncEvent.updateAdd(ev, value);
                } else {
                    DocaDpaDevSyncEvent.updateSet(ev, value);
                }
            }
        }
        FlexioDev.threadReschedule();
    }
}
