package org.peerdirect.doca.dpa;

import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.doca.DocaDpaContext;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.doca.syncevent.SyncEventAttachments;

/**
 * DOCA Core's side of a DOCA DPA context ({@link DocaDpaContext}): what {@code doca_sync_event}
 * ({@code add_subscriber_location_dpa}, {@code get_dpa_handle}, remote-net DPA handles) and
 * {@code doca_mmap} ({@code set_dpa_memrange}, {@code dev_get_dpa_handle}) call on the
 * {@code struct doca_dpa} they were given: counters in the DPA heap ({@link DpaSyncEvents}), keys
 * and handles over DPA or host memory ({@link DpaKeys}). Not DOCA calls: libdoca_common reaching
 * into libdoca_dpa [model]. {@link DocaDpa} is the one subclass; the user-facing calls are there.
 *
 * <p>Lock: {@link #lock} is the DPA context's lock (DocaDpa's calls take it); the hooks here take
 * it where they read the context's state, and their helpers take it per heap call.
 */
abstract sealed class DocaDpaCoreSide implements DocaDpaContext, SyncEventAttachments permits DocaDpa {

    /** The DPA context's lock: orders the user's calls against the launch dispatcher's thread and stop. */
    final ReentrantLock lock = new ReentrantLock();
    /** Sync events with a DPA location on this context, not destroyed, and their counters. */
    final DpaSyncEvents syncEvents;
    /** Keys and handles of DPA memory DOCA Core asks for (maps, remote sync events). */
    private final DpaKeys keys;

    DocaDpaCoreSide() {
        DocaDpa self = (DocaDpa) this; // sealed: the one subclass
        syncEvents = new DpaSyncEvents(self);
        keys = new DpaKeys(self);
    }

    /** Whether the context is started (the caller holds {@link #lock}). */
    abstract boolean started();

    /** The context's state, lower case, for messages (the caller holds {@link #lock}). */
    abstract String stateName();

    /** {@code doca_dpa_mem_free} of the heap block at {@code daddr}. */
    public abstract void memFree(long daddr);

    @Override
    public boolean hasDpaMemory() {
        return true;
    }

    /** A sync event counter of a DPA subscriber: a zeroed cell of the heap (the counter and its watch word, {@code DocaDpaDevSyncEvent.COUNTER_CELL} bytes; a block of its own, 64-byte aligned). */
    @Override
    public long syncEventCounterAlloc() {
        return syncEvents.counterAlloc();
    }

    /** BAD_STATE once the context stopped or was destroyed: the counter went with the process's memory. */
    @Override
    public void syncEventCounterFree(long daddr) {
        lock.lock();
        try {
            DocaException.check(started(), DocaError.DOCA_ERROR_BAD_STATE,
                    "doca_sync_event: the DPA context is " + stateName() + "; the counter went with its memory");
            memFree(daddr);
        } finally {
            lock.unlock();
        }
    }

    @Override
    public long syncEventCounterGet(long daddr) {
        return syncEvents.counterGet(daddr);
    }

    @Override
    public void syncEventCounterSet(long daddr, long value) {
        syncEvents.counterSet(daddr, value);
    }

    @Override
    public void syncEventAttached(DocaSyncEvent event) {
        syncEvents.attached(event);
    }

    @Override
    public void syncEventDetached(DocaSyncEvent event) {
        syncEvents.detached(event);
    }

    /** A FlexIO device mkey over the DPA range (local and remote read, write and atomics): a map's DPA memory range, a remotely published counter. */
    @Override
    public int dpaMkeyCreate(long daddr, long len) {
        return keys.mkeyCreate(daddr, len);
    }

    /** Destroys a key of {@link #dpaMkeyCreate}; nothing once the context stopped (it went with the process). */
    @Override
    public void dpaMkeyDestroy(int key) {
        keys.mkeyDestroy(key);
    }

    /** A key of the process's PD over host memory: a host map's DPA handle ({@code doca_mmap_dev_get_dpa_handle}) [model]. */
    @Override
    public int dpaHostMkeyCreate(long va, long len, boolean writable) {
        return keys.hostMkeyCreate(va, len, writable);
    }

    @Override
    public boolean dpaStarted() {
        lock.lock();
        try {
            return started();
        } finally {
            lock.unlock();
        }
    }

    /** A remote sync event's DPA handle: its address and key in the heap, the layout the device's {@code signal_set/add} read. */
    @Override
    public long dpaRemoteSyncEventHandle(long addr, int rkey) {
        return keys.remoteSyncEventHandle(addr, rkey);
    }

    /** BAD_STATE once the context stopped or was destroyed: the handle went with the process's memory. */
    @Override
    public void dpaRemoteSyncEventHandleFree(long handle) {
        syncEventCounterFree(handle);
    }

    /** A host counter's DPA handle (a CPU subscriber's, a DPA publisher's): a descriptor and a key, reached through the context's window [model]. */
    @Override
    public long dpaHostSyncEventHandle(long va) {
        return keys.hostSyncEventHandle(va);
    }

    /** BAD_STATE once the context stopped or was destroyed: the descriptor and key went with the process. */
    @Override
    public void dpaHostSyncEventHandleFree(long handle) {
        keys.hostSyncEventHandleFree(handle);
    }
}
