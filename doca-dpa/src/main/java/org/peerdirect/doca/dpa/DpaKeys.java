package org.peerdirect.doca.dpa;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.Map;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.dev.DocaDpaDevRdma;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioMkey;

/**
 * What DOCA Core asks of a DPA context for DPA memory reached by RDMA ({@code DocaDpaContext}):
 * FlexIO device mkeys over DPA memory ranges of maps and of remotely published sync event
 * counters, and the DPA handles of remote sync events. [model] DOCA's handle formats are not
 * public: a map's DPA handle is its mkey's key; a remote event's is the DPA address of its
 * address and key ({@link DocaDpaDevRdma#REMOTE_EVENT_ADDR}), what the device's signals read.
 *
 * <p>Lock: every call takes the context's lock; the keys live while the context is started.
 */
final class DpaKeys {

    private final DocaDpa dpa;
    /** Live device mkeys by key; guarded by the context's lock. */
    private final Map<Integer, FlexioMkey> mkeys = new HashMap<>();

    DpaKeys(DocaDpa dpa) {
        this.dpa = dpa;
    }

    /** A device mkey over the range, local and remote read, write and atomics; its key. INVALID_VALUE for a range outside the heap. */
    int mkeyCreate(long daddr, long len) {
        String w = "doca_dpa (an mkey over DPA memory)";
        dpa.lock.lock();
        try {
            FlexioMkey m = FlexioMkey.deviceMkeyCreate(dpa.process(w), daddr, len, true);
            mkeys.put(m.id(), m);
            return m.id();
        } catch (FlexioException e) {
            throw new DocaException(DocaError.DOCA_ERROR_INVALID_VALUE, w + ": " + e.getMessage(), e);
        } finally {
            dpa.lock.unlock();
        }
    }

    /**
     * A key of the process's PD over host memory (a host map's DPA handle), writable or read-only;
     * DRIVER when FlexIO refuses it (a range not mapped, the memlock limit).
     */
    int hostMkeyCreate(long va, long len, boolean writable) {
        String w = "doca_mmap_dev_get_dpa_handle (a key of the DPA process over host memory)";
        dpa.lock.lock();
        try {
            FlexioMkey m = FlexioMkey.hostMkeyCreate(dpa.process(w), va, len, writable);
            mkeys.put(m.id(), m);
            return m.id();
        } catch (FlexioException e) {
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, w + ": " + e.getMessage(), e);
        } finally {
            dpa.lock.unlock();
        }
    }

    /** Destroys a key of {@link #mkeyCreate}; nothing once the context stopped (the key went with its process). */
    void mkeyDestroy(int key) {
        dpa.lock.lock();
        try {
            FlexioMkey m = mkeys.remove(key);
            if (m != null && dpa.started()) {
                m.destroy();
            }
        } finally {
            dpa.lock.unlock();
        }
    }

    /** {@link DocaDpaDevRdma#REMOTE_EVENT_SIZE} bytes of the heap holding a remote counter's address and key. */
    long remoteSyncEventHandle(long addr, int rkey) {
        long h = dpa.memAlloc(DocaDpaDevRdma.REMOTE_EVENT_SIZE);
        dpa.h2dMemcpy(h, ByteBuffer.allocate(DocaDpaDevRdma.REMOTE_EVENT_SIZE).order(ByteOrder.LITTLE_ENDIAN)
                .putLong(DocaDpaDevRdma.REMOTE_EVENT_ADDR, addr).putInt(DocaDpaDevRdma.REMOTE_EVENT_RKEY, rkey).array());
        return h;
    }

    /**
     * A host sync event counter's DPA handle: a key of the DPA process over its 8 bytes, and a
     * {@link DocaDpaDevSyncEvent#HOST_SIZE}-byte descriptor in the heap (address, key, the
     * context's window, a zero lock); the descriptor's address with {@link DocaDpaDevSyncEvent#HOST_TAG}.
     */
    long hostSyncEventHandle(long va) {
        int key = hostMkeyCreate(va, 8, true);
        long d;
        try {
            d = dpa.memAlloc(DocaDpaDevSyncEvent.HOST_SIZE);
        } catch (RuntimeException e) {
            mkeyDestroy(key);
            throw e;
        }
        try {
            dpa.h2dMemcpy(d, ByteBuffer.allocate(DocaDpaDevSyncEvent.HOST_SIZE).order(ByteOrder.LITTLE_ENDIAN)
                    .putLong(DocaDpaDevSyncEvent.HOST_VA, va).putInt(DocaDpaDevSyncEvent.HOST_MKEY, key)
                    .putInt(DocaDpaDevSyncEvent.HOST_WINDOW, dpa.windowId()).array());
        } catch (RuntimeException e) {
            dpa.memFree(d);
            mkeyDestroy(key);
            throw e;
        }
        return d | DocaDpaDevSyncEvent.HOST_TAG;
    }

    /** Frees a handle of {@link #hostSyncEventHandle}: its key (read back from the descriptor), then the descriptor. */
    void hostSyncEventHandleFree(long handle) {
        long d = handle & ~DocaDpaDevSyncEvent.HOST_TAG;
        int key = ByteBuffer.wrap(dpa.d2hMemcpy(d + DocaDpaDevSyncEvent.HOST_MKEY, 4)).order(ByteOrder.LITTLE_ENDIAN).getInt();
        mkeyDestroy(key);
        dpa.syncEventCounterFree(d);
    }
}
