package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code doca_dpa_dev_buf.h}'s asynchronous copy, {@code doca_dpa_dev_post_memcpy} on a DPA
 * asynchronous ops context ({@code doca_dpa_async_ops}) by its DPA handle
 * ({@code doca_dpa_async_ops_get_dpa_handle}); its completion, when one is raised, arrives on the
 * completion context the ops were attached to ({@code doca_dpa_async_ops_attach}), with the ops'
 * user data ({@link DocaDpaDevCompletion#getCompletionUserData}); and its pointer to a host map's
 * memory, {@code doca_dpa_dev_mmap_get_external_ptr} ({@link #mmapGetExternalPtr}).
 *
 * <p>[model] DOCA does not publish what moves the bytes nor what a {@code doca_dpa_dev_async_ops_t}
 * is. Here the copy is the NIC's: an RDMA WRITE on a loopback RC QP of the DPA process (connected
 * to itself), from {@code src_mmap}'s key at {@code src_addr} to {@code dst_mmap}'s key at
 * {@code dst_addr}, so every byte crosses the NIC and the IOMMU, never a Java copy. The handle is
 * the DPA address of the ops' descriptor, written by the host library, little-endian:
 * the outbox the posts ring through {@link #OFF_OUTBOX}, the QP number {@link #OFF_QPN}, the send
 * producer index {@link #OFF_SQ_PI}, the index of the last doorbell {@link #OFF_SQ_DB}, log2 of the
 * send queue's depth {@link #OFF_LOG_SQ}, the queue size as created {@link #OFF_QUEUE_SIZE}, the
 * send queue {@link #OFF_SQ}, the doorbell record {@link #OFF_DBR}, the index after the last
 * completed copy {@link #OFF_SQ_CI} (the completion context stores it when it hands out a
 * completion of the QP: {@link DocaDpaDevCompletion#OFF_CI_TABLE}) and the started flag
 * {@link #OFF_STARTED}, all in DPA memory.
 *
 * <p>Submit flags ({@code enum doca_dpa_dev_submit_flag}, DOCA 3.x; DOCA 2.x named the last
 * argument {@code completion_requested}): without {@link #SUBMIT_FLAG_FLUSH} the WQE is written and
 * its doorbell deferred to the next flushed post ("the context may aggregate the operation");
 * without {@link #SUBMIT_FLAG_OPTIMIZE_REPORTS} the copy raises a completion when done, with it
 * none of its own: the next reported one covers it (a CQE of a later WQE on the same send queue
 * means every earlier one is done, mlx5's selective signalling).
 *
 * <p>Bad input: DOCA's post returns nothing, and a bad post leaves the DPA context in error
 * ({@code doca_dpa_peek_at_last_error}). Here a post on ops not started ends the process with
 * {@link #ERROR_NOT_STARTED}, a length of 0 or above 2 GiB with {@link #ERROR_BAD_LENGTH}, a post
 * past the queue size (copies posted and not yet seen completed by the completion context) with
 * {@link #ERROR_QUEUE_FULL}; a range past a map's end, or a destination map without write
 * permission, is the NIC's: a completion of type {@link DocaDpaDevCompletion#COMP_SEND_ERR} with
 * its syndrome, and the QP in error (later copies complete flushed in error).
 *
 * <p>DOCA documents the posts for DPA thread kernels only; the model does not check who posts
 * (the tests' bad-input cases post from an RPC).
 *
 * <p>Memory model: the WQEs (and the data the thread wrote for the NIC to read) are written back
 * ({@code __dpa_thread_memory_writeback}) before the doorbell; the checker sees every store.
 * Not thread-safe, as DOCA documents: one thread posts on an ops context at a time.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_dev_post_memcpy</a>
 */
public final class DocaDpaDevAsyncOps {

    /** {@code DOCA_DPA_DEV_SUBMIT_FLAG_NONE}. */
    public static final int SUBMIT_FLAG_NONE = 0;
    /** {@code DOCA_DPA_DEV_SUBMIT_FLAG_FLUSH}: ring the doorbell for this and earlier posts now. */
    public static final int SUBMIT_FLAG_FLUSH = 1;
    /** {@code DOCA_DPA_DEV_SUBMIT_FLAG_OPTIMIZE_REPORTS}: no completion of its own. */
    public static final int SUBMIT_FLAG_OPTIMIZE_REPORTS = 2;

    public static final int OFF_OUTBOX = 0;
    public static final int OFF_QPN = 4;
    public static final int OFF_SQ_PI = 8;
    public static final int OFF_SQ_DB = 12;
    public static final int OFF_LOG_SQ = 16;
    public static final int OFF_QUEUE_SIZE = 20;
    public static final int OFF_SQ = 24;
    public static final int OFF_DBR = 32;
    public static final int OFF_SQ_CI = 40;
    public static final int OFF_STARTED = 44;
    /** Bytes of an ops descriptor. */
    public static final int DESC_SIZE = 64;

    /** Process error ({@code flexio_dev_error}) of a post on async ops not started (or stopped). */
    public static final int ERROR_NOT_STARTED = 0xd4;
    /** Process error of a post with more copies outstanding than the queue size of {@code doca_dpa_async_ops_create}. */
    public static final int ERROR_QUEUE_FULL = 0xd5;
    /** Process error of a copy of 0 bytes or of more than 2 GiB (a WQE's byte count). */
    public static final int ERROR_BAD_LENGTH = 0xd6;

    private DocaDpaDevAsyncOps() {
    }

    /**
     * {@code doca_dpa_dev_post_memcpy(async_ops, dst_mmap, dst_addr, src_mmap, src_addr, length, flags)}:
     * starts copying {@code length} bytes; non-blocking. See the class comment for the flags and errors.
     */
    public static void postMemcpy(long asyncOps, int dstMmap, long dstAddr, int srcMmap, long srcAddr, long length, int flags) {
        Dpa.objectEnter(asyncOps); // non-thread-safe as every DOCA DPA object: two harts posting at once are C8
        if (Dpa.ld32(asyncOps + OFF_STARTED) == 0) {
            FlexioDev.error(ERROR_NOT_STARTED);
        }
        if (length <= 0 || length > 1L << 31) {
            FlexioDev.error(ERROR_BAD_LENGTH);
        }
        int pi = Dpa.ld32(asyncOps + OFF_SQ_PI);
        if ((pi - Dpa.ld32(asyncOps + OFF_SQ_CI) & 0xffff) >= Dpa.ld32(asyncOps + OFF_QUEUE_SIZE)) {
            FlexioDev.error(ERROR_QUEUE_FULL);
        }
        int qpn = Dpa.ld32(asyncOps + OFF_QPN);
        long wqe = FlexioDevQueue.swqeAt(Dpa.ld64(asyncOps + OFF_SQ), pi, Dpa.ld32(asyncOps + OFF_LOG_SQ));
        int ce = (flags & SUBMIT_FLAG_OPTIMIZE_REPORTS) != 0 ? 0 : FlexioDevQueue.CTRL_CQ_UPDATE;
        FlexioDevQueue.swqeSegCtrlSet(wqe, pi, qpn, ce, FlexioDevQueue.OPCODE_RDMA_WRITE, 3, 0);
        FlexioDevQueue.swqeSegRdmaSet(wqe + FlexioDevQueue.SEG_SIZE, dstMmap, dstAddr);
        FlexioDevQueue.swqeSegMemPtrDataSet(wqe + 2 * FlexioDevQueue.SEG_SIZE, (int) length, srcMmap, srcAddr);
        pi++;
        Dpa.st32(asyncOps + OFF_SQ_PI, pi);
        if ((flags & SUBMIT_FLAG_FLUSH) != 0) {
            Dpa.memoryWriteback(); // the WQEs (and the source bytes this thread wrote) before the NIC fetches them
            FlexioDev.outboxConfig(Dpa.ld32(asyncOps + OFF_OUTBOX));
            FlexioDev.qpSqRingDb(pi, qpn);
            Dpa.st32(asyncOps + OFF_SQ_DB, pi);
        }
        Dpa.objectLeave(asyncOps);
    }

    /** Process error of {@link #mmapGetExternalPtr} when the window cannot be configured with the key (not a key of the DPA process's PD), or from an RPC. */
    public static final int ERROR_NO_WINDOW = 0xd7;

    /**
     * {@code doca_dpa_dev_mmap_get_external_ptr(mmap, addr)}: a DPA pointer to host memory
     * {@code addr} of a map of host memory, for the thread's loads and stores. [model] Underneath:
     * the DPA context's window (the runtime block's {@link DocaDpaDev#OFF_WINDOW}) configured on
     * window entity 0 with the map's DPA handle, and the address in its aperture. The window's
     * rules hold (S001): stores stay in the thread's window cache until
     * {@code __dpa_thread_window_writeback}, loads see host changes only after
     * {@code __dpa_thread_window_read_inv}; the checker reports a forgotten one (C3, C4). One map
     * at a time per thread: the next call reconfigures the entity. A thread without the runtime's
     * block (an RPC), or a key the window refuses, ends the process with {@link #ERROR_NO_WINDOW}.
     */
    public static long mmapGetExternalPtr(int mmap, long addr) {
        long tls = FlexioDev.getThreadLocalStorage();
        if (tls == 0 || Dpa.windowConfig(Dpa.WINDOW_ENTITY_0, Dpa.ld32(tls + DocaDpaDev.OFF_WINDOW), mmap) != 0) {
            FlexioDev.error(ERROR_NO_WINDOW);
        }
        return Dpa.windowPtrAcquire(Dpa.WINDOW_ENTITY_0, addr);
    }

    /**
     * Copies posted on the ops and not yet seen completed by its completion context (a completion
     * handed out by {@link DocaDpaDevCompletion#getCompletion} covers its copy and every earlier
     * one). Not a DOCA call: what {@link #ERROR_QUEUE_FULL} counts.
     */
    public static int outstanding(long asyncOps) {
        return Dpa.ld32(asyncOps + OFF_SQ_PI) - Dpa.ld32(asyncOps + OFF_SQ_CI) & 0xffff;
    }
}
