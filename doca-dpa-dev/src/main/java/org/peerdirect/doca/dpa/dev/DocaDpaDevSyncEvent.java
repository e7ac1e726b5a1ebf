package org.peerdirect.doca.dpa.dev;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code doca_dpa_dev_sync_event.h}: a sync event on the DPA, by the handle the host got from
 * {@code doca_sync_event_get_dpa_handle}. [model] The handle is the DPA address of the event's
 * 8-byte counter, which lives in the DPA context's memory when the DPA subscribes (DPA_MODEL.md
 * §2.5); the calls are the DPA's own loads, atomics and a busy-wait, as DOCA's are. A counter the
 * host subscribes to (a DPA publisher reaching host memory through a window) has no DPA handle yet.
 *
 * <p>Ordering: {@link #updateAdd} and {@link #updateSet} are atomic and come after the calling
 * thread's earlier writes to DPA memory (a W→W memory fence first), so a waiter that sees the new
 * value sees what the thread wrote before it.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_dev_sync_event_get, _update_add, _update_set, _wait_gt</a>
 */
public final class DocaDpaDevSyncEvent {

    private DocaDpaDevSyncEvent() {
    }

    /** The event's value ({@code doca_dpa_dev_sync_event_get}). */
    public static long get(long handle) {
        return Dpa.ld64(handle);
    }

    /** Atomically adds {@code value} ({@code doca_dpa_dev_sync_event_update_add}). */
    public static void updateAdd(long handle, long value) {
        Dpa.memoryFence(Dpa.W, Dpa.W);
        Dpa.amoAdd64(handle, value);
    }

    /** Sets the value ({@code doca_dpa_dev_sync_event_update_set}): an atomic swap, single-copy atomic. */
    public static void updateSet(long handle, long value) {
        Dpa.memoryFence(Dpa.W, Dpa.W);
        Dpa.amoSwap64(handle, value);
    }

    /**
     * Busy-waits until {@code (value & mask) > threshold}, unsigned
     * ({@code doca_dpa_dev_sync_event_wait_gt}); the EU stays taken, as DOCA's does. A host update
     * arrives through the NIC, which is coherent with DPA memory.
     */
    public static void waitGt(long handle, long threshold, long mask) {
        while (Long.compareUnsigned(Dpa.ld64(handle) & mask, threshold) <= 0) {
            Dpa.compilerBarrier();
        }
    }
}
