package org.peerdirect.doca.dpa.dev;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code doca_dpa_dev_sync_event.h}: a sync event on the DPA, by the handle the host got from
 * {@code doca_sync_event_get_dpa_handle}. [model] DOCA does not publish its handle; here it is one
 * of two forms:
 * <ul>
 * <li>a DPA subscriber's counter lives in the DPA context's memory (DPA_MODEL.md §2.5): the handle
 * is its DPA address (8-byte aligned) and the calls are the DPA's own loads and atomics;</li>
 * <li>a CPU subscriber's counter lives in host memory (a DPA publisher, as NVIDIA's
 * {@code dpa_kernel_launch} and {@code dpa_initiator_target} samples have for their completion
 * events): the handle is the DPA address of a {@link #HOST_SIZE}-byte descriptor with
 * {@link #HOST_TAG} set in bit 0, holding the counter's host address ({@link #HOST_VA}), a key of
 * the DPA process over it ({@link #HOST_MKEY}), the DPA context's window ({@link #HOST_WINDOW})
 * and a spin lock ({@link #HOST_LOCK}). The DPA reaches the counter through its window (window
 * entity 1, configured at each call as {@code flexio_dev_msg} does): a load after
 * {@code window_read_inv}, a store followed by {@code window_writeback}. The window has no atomics,
 * so {@link #updateAdd} is a read-modify-write under the descriptor's lock: atomic against every
 * other DPA update of the event (they all take it), not against a host update of the same
 * counter (the CPU is the subscriber; DOCA allows one publisher).</li>
 * </ul>
 *
 * <p>Ordering: {@link #updateAdd} and {@link #updateSet} come after the calling thread's earlier
 * writes to DPA memory (a W→W memory fence first) and, for a host counter, after its earlier window
 * writes (a window write-back first), so a waiter that sees the new value sees what the thread
 * wrote before it.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_dev_sync_event_get, _update_add, _update_set, _wait_gt</a>
 */
public final class DocaDpaDevSyncEvent {

    /** Bit 0 of a handle naming a host counter's descriptor (DPA heap blocks are 64-byte aligned). */
    public static final long HOST_TAG = 1;
    /** Host counter descriptor: host address (u64), key (u32), window id (u32), lock (u32), watch word (u64). */
    public static final int HOST_VA = 0, HOST_MKEY = 8, HOST_WINDOW = 12, HOST_LOCK = 16, HOST_WATCH = 24, HOST_SIZE = 32;
    /** A DPA counter's cell: the counter, then its watch word ({@link #COUNTER_CELL} bytes, what DOCA Core allocates per DPA counter). */
    public static final int COUNTER_WATCH = 8, COUNTER_CELL = 16;
    /**
     * The watch word's tag (its upper 32 bits; the lower: the kernel dispatcher's thread id): set
     * while a queued kernel launch waits on the event, so an update activates the dispatcher.
     * The tag keeps a word that is not a watch (8 bytes of a handle not from DOCA Core) from
     * naming a thread [model: DOCA's runtime is not public].
     */
    public static final long WATCH_TAG = 0xd15bL;
    /** Process error when the window cannot be configured with the descriptor's key (the event was stopped under the DPA): async ops' code, the same fault. */
    public static final int ERROR_NO_WINDOW = DocaDpaDevAsyncOps.ERROR_NO_WINDOW;

    private DocaDpaDevSyncEvent() {
    }

    /** The event's value ({@code doca_dpa_dev_sync_event_get}). */
    public static long get(long handle) {
        if ((handle & HOST_TAG) == 0) {
            return Dpa.ld64(handle);
        }
        long p = hostCounter(handle - HOST_TAG);
        Dpa.windowReadInv(); // the host's or another thread's latest write, not this thread's cached line
        return Dpa.ld64(p);
    }

    /** Atomically adds {@code value} ({@code doca_dpa_dev_sync_event_update_add}). */
    public static void updateAdd(long handle, long value) {
        Dpa.memoryFence(Dpa.W, Dpa.W);
        if ((handle & HOST_TAG) == 0) {
            Dpa.amoAdd64(handle, value);
            wakeWatcher(handle + COUNTER_WATCH);
            return;
        }
        long d = handle - HOST_TAG;
        Dpa.windowWriteback(); // earlier window writes before the counter's
        FlexioDev.spinLock(d + HOST_LOCK);
        long p = hostCounter(d);
        Dpa.windowReadInv();
        Dpa.st64(p, Dpa.ld64(p) + value);
        Dpa.windowWriteback(); // in host memory before the lock goes: the next adder reads it
        FlexioDev.spinUnlock(d + HOST_LOCK);
        wakeWatcher(d + HOST_WATCH);
    }

    /** Sets the value ({@code doca_dpa_dev_sync_event_update_set}): single-copy atomic. */
    public static void updateSet(long handle, long value) {
        Dpa.memoryFence(Dpa.W, Dpa.W);
        if ((handle & HOST_TAG) == 0) {
            Dpa.amoSwap64(handle, value);
            wakeWatcher(handle + COUNTER_WATCH);
            return;
        }
        long d = handle - HOST_TAG;
        Dpa.windowWriteback();
        FlexioDev.spinLock(d + HOST_LOCK); // not between an adder's read and its write
        long p = hostCounter(d);
        Dpa.st64(p, value);
        Dpa.windowWriteback();
        FlexioDev.spinUnlock(d + HOST_LOCK);
        wakeWatcher(d + HOST_WATCH);
    }

    /**
     * After an update: activates the thread the event's watch word names (the kernel dispatcher,
     * {@link DocaDpaDevKernelQueue}), if one is set. The full fence orders the counter's new value
     * before the watch word's read, against the dispatcher's watch store before its counter read
     * (a store-load pair each side): either this update sees the watch, or the dispatcher's look
     * after setting it sees the value. Activating a running dispatcher latches one re-run (the
     * RTOS's), so an update landing during its pass is never lost. No firmware command.
     */
    private static void wakeWatcher(long watch) {
        Dpa.memoryFence(Dpa.RW, Dpa.RW);
        long w = Dpa.ld64(watch);
        if (w >>> 32 == WATCH_TAG) {
            FlexioDev.eventHandlerActivate((int) w);
        }
    }

    /** Sets the event's watch word to {@code threadId} (see {@link #wakeWatcher}); the caller fences before looking at the value again. */
    public static void watch(long handle, int threadId) {
        Dpa.st64(watchWord(handle), WATCH_TAG << 32 | (threadId & 0xffff_ffffL));
    }

    /** Clears the event's watch word: its updates activate nothing. */
    public static void unwatch(long handle) {
        Dpa.st64(watchWord(handle), 0);
    }

    private static long watchWord(long handle) {
        return (handle & HOST_TAG) == 0 ? handle + COUNTER_WATCH : handle - HOST_TAG + HOST_WATCH;
    }

    /**
     * Busy-waits until {@code (value & mask) > threshold}, unsigned
     * ({@code doca_dpa_dev_sync_event_wait_gt}); the EU stays taken, as DOCA's does. A host update
     * of a DPA counter arrives through the NIC, which is coherent with DPA memory; a host counter
     * is read through the window after {@code window_read_inv} each time.
     */
    public static void waitGt(long handle, long threshold, long mask) {
        while (Long.compareUnsigned(get(handle) & mask, threshold) <= 0) {
            Dpa.compilerBarrier();
        }
    }

    /** The host counter's address in window entity 1, configured with the descriptor's window and key. */
    private static long hostCounter(long d) {
        if (Dpa.windowConfig(Dpa.WINDOW_ENTITY_1, Dpa.ld32(d + HOST_WINDOW), Dpa.ld32(d + HOST_MKEY)) != 0) {
            Dpa.error(ERROR_NO_WINDOW);
        }
        return Dpa.windowPtrAcquire(Dpa.WINDOW_ENTITY_1, Dpa.ld64(d + HOST_VA));
    }
}
