package org.peerdirect.doca.dpa;

import java.util.function.Function;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioProcess;

/**
 * The memory calls of a {@link DocaDpa} context ({@code doca_dpa_mem_alloc/free},
 * {@code doca_dpa_memset}, {@code doca_dpa_h2d/d2h_memcpy}) on its FlexIO process's heap; the
 * context's public methods delegate here.
 *
 * <p>Lock: each call takes the context's lock for its whole FlexIO call ({@link #onHeap}); BAD_STATE
 * unless the context is started, FlexIO's errors as DOCA's ({@link DocaDpa#flexio}).
 */
final class DocaDpaMem {

    private final DocaDpa dpa;

    DocaDpaMem(DocaDpa dpa) {
        this.dpa = dpa;
    }

    /** A FlexIO heap call of a started context under its lock, FlexIO's errors as DOCA's. */
    private <T> T onHeap(String w, Function<FlexioProcess, T> call) {
        dpa.lock.lock();
        try {
            return call.apply(dpa.process(w)); // BAD_STATE unless started
        } catch (FlexioException e) {
            throw DocaDpa.flexio(w, e);
        } finally {
            dpa.lock.unlock();
        }
    }

    long alloc(long size) {
        String w = "doca_dpa_mem_alloc";
        return onHeap(w, p -> {
            DocaException.check(size > 0, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": size " + size);
            long d = p.bufDevAlloc(size);
            DocaException.check(d != 0, DocaError.DOCA_ERROR_NO_MEMORY, w + ": no room for " + size + " bytes in the DPA heap " + p.processMemInfoGet());
            return d;
        });
    }

    void free(long daddr) {
        String w = "doca_dpa_mem_free";
        onHeap(w, p -> {
            DocaException.check(p.bufDevFree(daddr) == 0, DocaError.DOCA_ERROR_INVALID_VALUE,
                    String.format("%s: 0x%x is no allocation of this DPA context", w, daddr));
            return null;
        });
    }

    void memset(long daddr, int value, long size) {
        String w = "doca_dpa_memset";
        onHeap(w, p -> {
            DocaException.check(size >= 0 && size <= Integer.MAX_VALUE, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": size " + size);
            p.bufDevMemset(value, size, daddr);
            return null;
        });
    }

    void h2dMemcpy(long daddr, byte[] src) {
        String w = "doca_dpa_h2d_memcpy";
        onHeap(w, p -> {
            DocaException.check(src != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null source");
            p.host2devMemcpy(src, daddr);
            return null;
        });
    }

    byte[] d2hMemcpy(long daddr, int size) {
        String w = "doca_dpa_d2h_memcpy";
        return onHeap(w, p -> {
            DocaException.check(size >= 0, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": size " + size);
            return p.dev2hostMemcpy(daddr, size);
        });
    }
}
