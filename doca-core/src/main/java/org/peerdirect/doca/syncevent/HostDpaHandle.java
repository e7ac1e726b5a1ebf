package org.peerdirect.doca.syncevent;

import java.util.function.LongSupplier;

import org.peerdirect.doca.DocaDpaContext;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;

/**
 * The DPA handle of a sync event counter in host memory (a DPA publisher with a CPU subscriber):
 * made by the DPA context at the first {@link #get} ({@link DocaDpaContext#dpaHostSyncEventHandle}:
 * a descriptor and a key the DPA's window reaches the counter through), one DPA context per event,
 * released before the counter's page goes so the DPA's window never outlives it.
 *
 * <p>Lock: {@code this}; the handle and its context change only under it.
 */
final class HostDpaHandle {

    private long handle;
    private DocaDpaContext dpa;

    /**
     * The handle for {@code dpa}, made once; {@code counterVa} checks the event is started (under
     * this lock, so a stop releasing the handle orders with it) and gives the counter's address.
     *
     * @throws DocaException INVALID_VALUE (a second DPA context), and what {@code counterVa} or the context throw
     */
    synchronized long get(String w, DocaDpaContext d, LongSupplier counterVa) {
        long va = counterVa.getAsLong();
        if (handle != 0) {
            DocaException.check(dpa == d, DocaError.DOCA_ERROR_INVALID_VALUE,
                    w + ": the event's counter is reached by " + dpa + " already; not by a second DPA context");
            return handle;
        }
        handle = d.dpaHostSyncEventHandle(va);
        dpa = d;
        return handle;
    }

    /** Whether the DPA has a handle to the counter (its updates reach the page without the host). */
    synchronized boolean made() {
        return handle != 0;
    }

    /** Frees the descriptor and key, if made; a context stopped or destroyed meanwhile took them with its process (BAD_STATE, INVALID_VALUE: ignored). */
    void release() {
        long h;
        DocaDpaContext d;
        synchronized (this) {
            h = handle;
            d = dpa;
            handle = 0;
            dpa = null;
        }
        if (h == 0) {
            return;
        }
        try {
            d.dpaHostSyncEventHandleFree(h);
        } catch (DocaException e) {
            // BAD_STATE: the context stopped; INVALID_VALUE: it was destroyed too (a launch's wait
            // or completion event outliving the context that made its handle): gone with the process
            if (e.error() != DocaError.DOCA_ERROR_BAD_STATE && e.error() != DocaError.DOCA_ERROR_INVALID_VALUE) {
                throw e;
            }
        }
    }
}
