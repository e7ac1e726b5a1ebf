package org.peerdirect.flexio.dev;

import org.peerdirect.hca.dpa.isa.Dpa;
import org.peerdirect.hca.dpa.isa.ThreadCtx;

/**
 * {@code flexio_dev.h} and {@code flexio_dev_err.h}: the thread context, the ways a handler gives
 * its EU back, errors, outbox and window configuration, the outbox doorbells, handler activation,
 * spinlocks and the aligned copies. Each call is a few ISA calls ({@link Dpa}); the outbox
 * doorbells are 64-bit stores into the current EU's outbox page at the offsets and bit positions of
 * {@code struct dpa_outbox9_u_page_le} ({@code flexio_dev_dpa_arch.h}).
 *
 * <p>Outbox rule (S001): doorbells of a thread go through the outbox it configured
 * ({@link #outboxConfig}); a thread that rings before configuring one, or names a queue of another
 * process's uid, ends its process (the silicon's check).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">FlexIO SDK: device API</a>
 */
public final class FlexioDev {

    /** {@code FLEXIO_DEV_STATUS_SUCCESS}. */
    public static final int STATUS_SUCCESS = 0;
    /** {@code FLEXIO_DEV_STATUS_FAILED}. */
    public static final int STATUS_FAILED = 1;

    /** {@code FLEXIO_DEV_WINDOW_ENTITY_0}. */
    public static final int WINDOW_ENTITY_0 = Dpa.WINDOW_ENTITY_0;
    /** {@code FLEXIO_DEV_WINDOW_ENTITY_1}. */
    public static final int WINDOW_ENTITY_1 = Dpa.WINDOW_ENTITY_1;

    /** The first user error code {@code flexio_dev_error} accepts ({@code FLEXIO_DEV_ERROR_USER_MIN}, 0x80). */
    public static final int USER_ERROR_MIN = 0x80;
    /** {@code FLEXIO_DEV_ERROR_ILLEGAL_ERR}: what the process status shows for a code outside 0x80..0xff. */
    public static final int ERROR_ILLEGAL_ERR = 0x42;

    // outbox page registers (flexio_dev_dpa_arch.h, struct dpa_outbox9_u_page_le)
    static final int OUTBOX_CQ_DB = 0x100;
    static final int OUTBOX_EQ_DB_NO_REARM = 0x180;
    static final int OUTBOX_SXD_DB = 0x1c0;
    static final int OUTBOX_RXT_DB = 0x280;
    private static final long M24 = 0xffffff;

    private FlexioDev() {
    }

    // ------------------------------------------------------------------ thread context

    /** @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_dev_get_thread_ctx</a> */
    public static ThreadCtx getThreadCtx() {
        return Dpa.threadCtx();
    }

    /** The DPA_THREAD object id of the running thread ({@code flexio_dev_get_thread_id}). */
    public static int getThreadId() {
        return Dpa.threadCtx().threadId();
    }

    /** The thread-local storage DPA address given at creation, 0 if none ({@code flexio_dev_get_thread_local_storage}). */
    public static long getThreadLocalStorage() {
        return Dpa.threadCtx().tls();
    }

    // ------------------------------------------------------------------ giving the EU back

    /** Releases the EU; the next trigger starts the handler from its beginning. Never returns ({@code flexio_dev_thread_reschedule}). */
    public static void threadReschedule() {
        Dpa.reschedule();
    }

    /** Releases the EU; later triggers are ignored. Never returns ({@code flexio_dev_thread_finish}). */
    public static void threadFinish() {
        Dpa.finish();
    }

    /** Releases the EU and triggers the thread again at once. Never returns ({@code flexio_dev_thread_retrigger}). */
    public static void threadRetrigger() {
        Dpa.retrigger();
    }

    /** Continuable handlers: resume here on the next trigger; no effect otherwise ({@code flexio_dev_yield}). */
    public static void yield() {
        Dpa.yieldContinuable();
    }

    /** Ends every thread of the process; the process status becomes 0x40. Never returns ({@code flexio_dev_process_finish}). */
    public static void processFinish() {
        Dpa.processFinish();
    }

    /**
     * Ends the process with user error {@code code} (0x80..0xff; any other code shows as
     * {@link #ERROR_ILLEGAL_ERR}); the host sees {@code FLEXIO_ERR_STATUS_USER_ERROR}. Never returns.
     *
     * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_dev_error (flexio_dev_err.h)</a>
     */
    public static void error(int code) {
        Dpa.error(code);
    }

    /** The thread's recoverable error flag ({@code flexio_dev_get_errno}). */
    public static int getErrno() {
        return Dpa.errno();
    }

    /** Clears the flag ({@code flexio_dev_rst_errno}). */
    public static void rstErrno() {
        Dpa.resetErrno();
    }

    /** The flag, cleared ({@code flexio_dev_get_and_rst_errno}). */
    public static int getAndRstErrno() {
        return Dpa.resetErrno();
    }

    // ------------------------------------------------------------------ outbox and window configuration

    /** Binds the thread to outbox object {@code outboxId} of its process ({@code flexio_dev_outbox_config}). */
    public static int outboxConfig(int outboxId) {
        return Dpa.outboxConfig(outboxId) == 0 ? STATUS_SUCCESS : STATUS_FAILED;
    }

    /**
     * Configures window entity 0 or 1 with window object {@code windowId} and an mkey of the
     * window's PD ({@code flexio_dev_window_config}); a foreign or revoked mkey fails.
     */
    public static int windowConfig(int entity, int windowId, int mkey) {
        return Dpa.windowConfig(entity, windowId, mkey) == 0 ? STATUS_SUCCESS : STATUS_FAILED;
    }

    /** The DPA address of host address {@code haddr} in the entity's window ({@code flexio_dev_window_ptr_acquire}). */
    public static long windowPtrAcquire(int entity, long haddr) {
        return Dpa.windowPtrAcquire(entity, haddr);
    }

    /**
     * Copies {@code size} bytes of DPA memory at {@code daddr} to host address {@code haddr} through
     * window entity 0 (configured by the caller), then writes the window back so the host sees
     * them ({@code flexio_dev_window_copy_to_host}). 8-byte steps where both ends are aligned.
     */
    public static int windowCopyToHost(long haddr, long daddr, int size) {
        if (size < 0) {
            return STATUS_FAILED;
        }
        long w = Dpa.windowPtrAcquire(WINDOW_ENTITY_0, haddr);
        int i = 0;
        if (((w | daddr) & 7) == 0) {
            for (; i + 8 <= size; i += 8) {
                Dpa.st64(w + i, Dpa.ld64(daddr + i));
            }
        }
        for (; i < size; i++) {
            Dpa.st8(w + i, Dpa.ld8(daddr + i));
        }
        Dpa.windowWriteback();
        return STATUS_SUCCESS;
    }

    // ------------------------------------------------------------------ outbox doorbells

    private static void outbox(int reg, long value) {
        Dpa.st64(Dpa.threadCtx().outboxBase() + reg, value);
    }

    /**
     * {@code SXD_DB}: the send queue (SQ, or a QP's send queue) {@code qnum} has WQEs up to
     * producer index {@code pi}. The WQEs must be written back first ({@code __dpa_thread_memory_writeback}).
     *
     * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_dev_qp_sq_ring_db</a>
     */
    public static void qpSqRingDb(int pi, int qnum) {
        outbox(OUTBOX_SXD_DB, (pi & 0xffffL) | (qnum & M24) << 32);
    }

    /**
     * {@code CQ_DB}: arms CQ {@code cqn} with consumer index {@code ci}; a CQE at or past {@code ci}
     * (already there or coming) triggers the CQ's thread ({@code flexio_dev_cq_arm}).
     */
    public static void cqArm(int ci, int cqn) {
        outbox(OUTBOX_CQ_DB, (cqn & M24) | (ci & M24) << 32);
    }

    /** {@code EQ_DB_NO_REARM}: the EQ's consumer index, without re-arming ({@code flexio_dev_eq_update_ci}). */
    public static void eqUpdateCi(int ci, int eqn) {
        outbox(OUTBOX_EQ_DB_NO_REARM, (eqn & M24) | (ci & 0x3ffffffL) << 32);
    }

    /** {@code RXT_DB}: a zero CQE on CQ {@code cqn}, triggering its thread or its EQ ({@code flexio_dev_zcqe_gen}). */
    public static void zcqeGen(int cqn) {
        outbox(OUTBOX_RXT_DB, cqn & M24);
    }

    /** The same doorbell, named for a host CQ whose EQ raises MSI-X ({@code flexio_dev_msix_send}). */
    public static void msixSend(int cqn) {
        zcqeGen(cqn);
    }

    /** Triggers another handler of the process by its thread id ({@code flexio_dev_event_handler_activate}). */
    public static int eventHandlerActivate(int threadId) {
        return Dpa.activate(threadId) == 0 ? STATUS_SUCCESS : STATUS_FAILED;
    }

    // ------------------------------------------------------------------ spinlocks (a 32-bit word of process memory)

    /** {@code spin_init}: the lock word at {@code lock} free. */
    public static void spinInit(long lock) {
        Dpa.amoSwap32(lock, 0);
    }

    /**
     * {@code spin_lock}: {@code __atomic_exchange_n(lock, 1, SEQ_CST)} until it was 0; the fence
     * after it keeps the critical section's accesses after the acquisition.
     */
    public static void spinLock(long lock) {
        while (Dpa.amoSwap32(lock, 1) != 0) {
            Dpa.compilerBarrier();
        }
        Dpa.memoryFence(Dpa.RW, Dpa.RW);
    }

    /** {@code spin_trylock}: 1 when taken, 0 when another holds it. */
    public static int spinTrylock(long lock) {
        if (Dpa.amoSwap32(lock, 1) != 0) {
            return 0;
        }
        Dpa.memoryFence(Dpa.RW, Dpa.RW);
        return 1;
    }

    /** {@code spin_unlock}: the critical section's accesses ordered before the release. */
    public static void spinUnlock(long lock) {
        Dpa.memoryFence(Dpa.RW, Dpa.W);
        Dpa.amoSwap32(lock, 0);
    }

    // ------------------------------------------------------------------ copies (alignment is the caller's duty)

    /** {@code flexio_dev_memcpy16}: {@code n} bytes in 2-byte steps; returns {@code dst}. */
    public static long memcpy16(long dst, long src, long n) {
        for (long i = 0; i + 2 <= n; i += 2) {
            Dpa.st16(dst + i, Dpa.ld16(src + i));
        }
        return dst;
    }

    /** {@code flexio_dev_memcpy32}: {@code n} bytes in 4-byte steps; returns {@code dst}. */
    public static long memcpy32(long dst, long src, long n) {
        for (long i = 0; i + 4 <= n; i += 4) {
            Dpa.st32(dst + i, Dpa.ld32(src + i));
        }
        return dst;
    }

    /** {@code flexio_dev_memcpy64}: {@code n} bytes in 8-byte steps; returns {@code dst}. */
    public static long memcpy64(long dst, long src, long n) {
        for (long i = 0; i + 8 <= n; i += 8) {
            Dpa.st64(dst + i, Dpa.ld64(src + i));
        }
        return dst;
    }

    /** Byte-wise {@code memset} of DPA memory (the libc subset {@code libflexio_libc} gives). */
    public static long memset(long dst, int c, long n) {
        for (long i = 0; i < n; i++) {
            Dpa.st8(dst + i, c);
        }
        return dst;
    }
}
