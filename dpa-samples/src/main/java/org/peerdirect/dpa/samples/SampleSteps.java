package org.peerdirect.dpa.samples;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.function.Supplier;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.flexio.FlexioFunc;

/**
 * The shape of a DOCA DPA sample's C function (a run of calls, each checked, then a {@code goto}
 * chain destroying what was made, newest first): each call prints the sample's
 * {@code DOCA_LOG_ERR("Function NAME failed (%s)")} at its C line when it fails, and what it made
 * is destroyed by {@link #finish} whatever happened, a failing destroy printing its own line and
 * the teardown going on. The first failure's message is kept in {@link DpaCommon#causes}. One per
 * sample run, one thread.
 */
final class SampleSteps {

    /** A call that failed: its {@code DOCA_LOG_ERR} was printed, the teardown runs. */
    static final class Failed extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final DocaError error;

        Failed(DocaError error) {
            super(null, null, false, false);
            this.error = error;
        }
    }

    private final DocaLog log;
    private final DpaCommon common;
    /** The C file and function the lines are printed as. */
    private final String file;
    private final String func;
    /** The sample's goto chain: what to destroy, newest first. */
    private final Deque<Runnable> teardown = new ArrayDeque<>();

    SampleSteps(DocaLog log, DpaCommon common, String file, String func) {
        this.log = log;
        this.common = common;
        this.file = file;
        this.func = func;
    }

    /** One call of the sample: on failure {@code DOCA_LOG_ERR("Function NAME failed (%s)")} at {@code line}, then {@link Failed}. */
    <T> T call(int line, String name, Supplier<T> call) {
        try {
            return call.get();
        } catch (DocaException e) {
            log.err(file, line, func, "Function " + name + " failed (" + e.error().getDescr() + ")");
            throw new Failed(common.failed(e));
        }
    }

    void run(int line, String name, Runnable call) {
        call(line, name, () -> {
            call.run();
            return null;
        });
    }

    /** Pushes a teardown step: on failure {@code DOCA_LOG_ERR("Function NAME failed: %s")} at {@code line}; the teardown goes on. */
    void undo(int line, String name, Runnable destroy) {
        teardown.push(() -> {
            try {
                destroy.run();
            } catch (DocaException e) {
                log.err(file, line, func, "Function " + name + " failed: " + e.error().getDescr());
                common.failed(e);
            }
        });
    }

    /**
     * Runs {@code steps}, then {@code after} if they all succeeded, then the teardown; the first
     * error, or DRIVER when only a destroy failed (the sample's {@code DOCA_ERROR_PROPAGATE}).
     */
    DocaError finish(Runnable steps, Runnable after) {
        DocaError result = DocaError.DOCA_SUCCESS;
        try {
            steps.run();
            after.run();
        } catch (Failed f) {
            result = f.error;
        }
        int before = common.causes.size();
        while (!teardown.isEmpty()) {
            teardown.pop().run();
        }
        if (result == DocaError.DOCA_SUCCESS && common.causes.size() > before) {
            result = DocaError.DOCA_ERROR_DRIVER;
        }
        return result;
    }

    /** {@code dpa_thread_obj_init}: create, set_func_arg, [local storage,] start. */
    DocaDpaThread threadObjInit(DocaDpa dpa, FlexioFunc f, long arg, long tls, int errLine, int destroyLine) {
        DocaDpaThread t = call(errLine, "dpa_thread_obj_init", () -> DocaDpaThread.create(dpa));
        undo(destroyLine, "dpa_thread_obj_destroy", t::destroy);
        run(errLine, "dpa_thread_obj_init", () -> {
            t.setFuncArg(f, arg);
            if (tls != 0) {
                t.setLocalStorage(tls);
            }
            t.start();
        });
        return t;
    }

    /** {@code doca_dpa_mem_alloc}, freed in the teardown. */
    long memAlloc(DocaDpa dpa, long size, int errLine, int freeLine) {
        long d = call(errLine, "doca_dpa_mem_alloc", () -> dpa.memAlloc(size));
        undo(freeLine, "doca_dpa_mem_free", () -> dpa.memFree(d));
        return d;
    }

    /** {@code doca_mmap_obj_init} of {@code MMAP_TYPE_DPA}: its DPA handle. */
    int dpaMmap(DocaDpa dpa, DocaDev dev, long daddr, long len, int permissions, int errLine, int destroyLine) {
        DocaMmap m = call(errLine, "doca_mmap_obj_init", DocaMmap::create);
        undo(destroyLine, "doca_mmap_obj_destroy", m::destroy);
        return call(errLine, "doca_mmap_obj_init", () -> {
            m.setPermissions(permissions);
            m.setDpaMemrange(dpa, daddr, len);
            m.addDev(dev);
            m.start();
            return m.devGetDpaHandle(dev);
        });
    }
}
