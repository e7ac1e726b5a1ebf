package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevMsg;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code doca_dpa_dev.h}: what a kernel launched by {@code doca_dpa_kernel_launch_update_*} or a
 * DPA thread ({@code doca_dpa_thread}) asks of its thread.
 *
 * <p>[model] Where a thread finds its rank and local storage: every DOCA DPA thread (a rank of a
 * launch, or a {@code doca_dpa_thread}) is a FlexIO DPA thread whose thread-local storage (written
 * by the host library before the thread is first triggered) is the runtime's block,
 * {@link #RANK_BLOCK_SIZE} bytes, little-endian: {@code rank} u32 at {@link #OFF_RANK},
 * {@code num_threads} u32 at {@link #OFF_NUM_THREADS}, the user's local storage address u64 at
 * {@link #OFF_LOCAL_STORAGE} (0 if none), the context's device log stream u64 at
 * {@link #OFF_LOG_STREAM} (a FlexIO message stream descriptor), the context's trace area u64 at
 * {@link #OFF_TRACE} ({@link DocaDpaDevTrace}), the context's window u32 at {@link #OFF_WINDOW}. DOCA does not publish how its runtime passes them; the
 * host writes the block through {@code doca_dpa_h2d_memcpy}'s path (NIC→DPA is coherent).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">DOCA DPA device API</a>
 */
public final class DocaDpaDev {

    /** Offset of the rank in a launch's rank block. */
    public static final int OFF_RANK = 0;
    /** Offset of the number of ranks in a launch's rank block. */
    public static final int OFF_NUM_THREADS = 4;
    /** Offset of the user's local storage address ({@code doca_dpa_thread_set_local_storage}). */
    public static final int OFF_LOCAL_STORAGE = 8;
    /** Offset of the DPA context's log stream ({@code doca_dpa_dev_log}'s destination). */
    public static final int OFF_LOG_STREAM = 16;
    /** Offset of the DPA context's trace area ({@code doca_dpa_dev_trace}'s destination, {@link DocaDpaDevTrace}). */
    public static final int OFF_TRACE = 24;
    /** Offset of the DPA context's window id (u32; {@code doca_dpa_dev_mmap_get_external_ptr}'s, {@link DocaDpaDevAsyncOps#mmapGetExternalPtr}). */
    public static final int OFF_WINDOW = 32;
    /** Bytes of the runtime's block. */
    public static final int RANK_BLOCK_SIZE = 40;

    /** {@code DOCA_DPA_DEV_LOG_LEVEL_*}: disable, critical, error, warning, info, debug. */
    public static final int LOG_LEVEL_DISABLE = 10;
    public static final int LOG_LEVEL_CRIT = 20;
    public static final int LOG_LEVEL_ERROR = 30;
    public static final int LOG_LEVEL_WARNING = 40;
    public static final int LOG_LEVEL_INFO = 50;
    public static final int LOG_LEVEL_DEBUG = 60;

    private DocaDpaDev() {
    }

    /** The rank of the calling kernel thread or thread group member, in {@code [0, numThreads())} ({@code doca_dpa_dev_thread_rank}). */
    public static int threadRank() {
        return Dpa.ld32(FlexioDev.getThreadLocalStorage() + OFF_RANK);
    }

    /** The number of ranks of the calling thread's launch or thread group ({@code doca_dpa_dev_num_threads}); 1 for a lone thread. */
    public static int numThreads() {
        return Dpa.ld32(FlexioDev.getThreadLocalStorage() + OFF_NUM_THREADS);
    }

    /** The local storage the host gave the thread, 0 if none ({@code doca_dpa_dev_thread_get_local_storage}). */
    public static long threadGetLocalStorage() {
        return Dpa.ld64(FlexioDev.getThreadLocalStorage() + OFF_LOCAL_STORAGE);
    }

    /** Kernel-launch kernels: gives the EU to others for a while ({@code doca_dpa_dev_yield}); no effect on a kernel's state. */
    public static void yield() {
        Dpa.compilerBarrier();
    }

    /**
     * Releases the EU; the next completion on the thread's completion context, or a notification,
     * runs the thread again from its start ({@code doca_dpa_dev_thread_reschedule}). Never returns.
     */
    public static void threadReschedule() {
        FlexioDev.threadReschedule();
    }

    /** No more triggers for this thread ({@code doca_dpa_dev_thread_finish}). Never returns. */
    public static void threadFinish() {
        FlexioDev.threadFinish();
    }

    /**
     * Triggers the thread attached to a notification completion; no completion element is produced
     * ({@code doca_dpa_dev_thread_notify}). [model] The handle is that thread's DPA_THREAD id; a
     * thread not running (never run, stopped) ignores it, as the RTOS ignores a trigger then.
     */
    public static void threadNotify(long notificationCompletionHandle) {
        FlexioDev.eventHandlerActivate((int) notificationCompletionHandle);
    }

    /**
     * {@code doca_dpa_dev_log(level, ...)}: {@code text} as one line of the context's device log
     * when {@code level} passes the host's {@code doca_dpa_set_log_level}. Best effort, as DOCA
     * documents ("not all print statements may appear"): a thread without the runtime's block (an
     * RPC) prints nothing, and a full ring loses lines. Formatting is the caller's (Java strings).
     */
    public static void log(int level, String text) {
        long tls = FlexioDev.getThreadLocalStorage();
        if (tls == 0) {
            return;
        }
        long stream = Dpa.ld64(tls + OFF_LOG_STREAM);
        if (stream != 0) {
            FlexioDevMsg.msg(stream, flexioLevel(level), text);
        }
    }

    /** DOCA's device log level (10..60) as FlexIO's message level (0 no print .. 5 debug). */
    public static int flexioLevel(int level) {
        if (level <= LOG_LEVEL_DISABLE) {
            return FlexioDevMsg.NO_PRINT;
        }
        if (level <= LOG_LEVEL_CRIT) {
            return FlexioDevMsg.ALWAYS_PRINT;
        }
        if (level <= LOG_LEVEL_ERROR) {
            return FlexioDevMsg.ERROR;
        }
        if (level <= LOG_LEVEL_WARNING) {
            return FlexioDevMsg.WARN;
        }
        return level <= LOG_LEVEL_INFO ? FlexioDevMsg.INFO : FlexioDevMsg.DEBUG;
    }
}
