package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code doca_dpa_dev.h}: what a kernel launched by {@code doca_dpa_kernel_launch_update_*} asks
 * of its thread.
 *
 * <p>[model] Where a rank finds its rank: each rank of a launch is a DPA thread whose thread-local
 * storage (set by the host library at the launch, before the thread is triggered) starts with the
 * launch's rank block, {@link #RANK_BLOCK_SIZE} bytes, little-endian: {@code rank} u32 at
 * {@link #OFF_RANK}, {@code num_threads} u32 at {@link #OFF_NUM_THREADS}. DOCA does not publish
 * how its runtime passes them; the host writes the block through {@code doca_dpa_h2d_memcpy}'s
 * path, and the RTOS's trigger orders it before the thread's first load (NIC→DPA is coherent).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">DOCA DPA device API</a>
 */
public final class DocaDpaDev {

    /** Offset of the rank in a launch's rank block. */
    public static final int OFF_RANK = 0;
    /** Offset of the number of ranks in a launch's rank block. */
    public static final int OFF_NUM_THREADS = 4;
    /** Bytes of a launch's rank block. */
    public static final int RANK_BLOCK_SIZE = 8;

    private DocaDpaDev() {
    }

    /** The rank of the calling kernel thread, in {@code [0, numThreads())} ({@code doca_dpa_dev_thread_rank}). */
    public static int threadRank() {
        return Dpa.ld32(FlexioDev.getThreadLocalStorage() + OFF_RANK);
    }

    /** The number of ranks of the calling thread's launch ({@code doca_dpa_dev_num_threads}). */
    public static int numThreads() {
        return Dpa.ld32(FlexioDev.getThreadLocalStorage() + OFF_NUM_THREADS);
    }
}
