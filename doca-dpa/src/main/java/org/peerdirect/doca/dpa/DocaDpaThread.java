package org.peerdirect.doca.dpa;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.flexio.FlexioEventHandler;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioFunc;

/**
 * {@code struct doca_dpa_thread}: a persistent DPA thread running a {@code __dpa_global__} function
 * each time it is triggered (a notification, a completion on its completion context). Order as in
 * DOCA's samples: create → {@link #setFuncArg} → [{@link #setLocalStorage}] → [{@link #setAffinity}]
 * → {@link #start} → (attach completion contexts) → {@link #run}. Built on a FlexIO event handler
 * whose thread-local storage is the runtime's block ({@link DocaDpaDev}: rank 0 of 1, the local
 * storage address).
 *
 * <p>Not thread-safe, as DOCA documents. Its DPA context's lock is taken for each call.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">doca_dpa_thread_create, _set_func_arg, _set_local_storage, _set_affinity, _start, _run, _stop, _destroy</a>
 */
public final class DocaDpaThread {

    private enum State {
        CREATED, STARTED, RUNNING, STOPPED, DESTROYED
    }

    private final DocaDpa dpa;
    /** Written under the context's lock (with the handler it goes with); volatile for the unlocked order checks. */
    private volatile State state = State.CREATED;
    private FlexioFunc func;
    private long arg;
    private long localStorage;
    private int euId = -1;
    private FlexioEventHandler handler;
    private long block;
    /**
     * What triggers this thread, for {@link DocaDpaObjects}: its notification completions and
     * completion contexts while started, each shown by its {@code toString} (the hook a completion
     * context's {@code set_thread}/{@code start} calls {@link #attachCompletion} from).
     */
    private final java.util.List<Object> completions = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** The thread group this thread is rank {@link #rank} of, or null ({@link DocaDpaThreadGroup#setThread}). */
    private DocaDpaThreadGroup group;
    private int rank;

    private DocaDpaThread(DocaDpa dpa) {
        this.dpa = dpa;
    }

    /**
     * {@code doca_dpa_thread_create}.
     *
     * @throws DocaException INVALID_VALUE (null), BAD_STATE (the context is not started)
     */
    public static DocaDpaThread create(DocaDpa dpa) {
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_dpa_thread_create: null DPA");
        DocaDpaThread t = new DocaDpaThread(dpa);
        dpa.lock.lock();
        try {
            dpa.attach("doca_dpa_thread_create", t);
        } finally {
            dpa.lock.unlock();
        }
        return t;
    }

    /** {@code doca_dpa_thread_set_func_arg}: the {@code __dpa_global__} function and its {@code uint64_t} argument; before start. */
    public void setFuncArg(FlexioFunc func, long arg) {
        String w = "doca_dpa_thread_set_func_arg";
        configure(w);
        DocaException.check(func != null && func.kind() == FlexioFunc.Kind.GLOBAL, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": " + (func == null ? "null function" : func.name() + " is not a __dpa_global__ function"));
        this.func = func;
        this.arg = arg;
    }

    /** {@code doca_dpa_thread_set_local_storage}: the DPA address {@code doca_dpa_dev_thread_get_local_storage} returns; before start. */
    public void setLocalStorage(long daddr) {
        configure("doca_dpa_thread_set_local_storage");
        this.localStorage = daddr;
    }

    /** {@code doca_dpa_thread_set_affinity}: pins the thread to the affinity's EU; before start. */
    public void setAffinity(DocaDpaEuAffinity affinity) {
        String w = "doca_dpa_thread_set_affinity";
        configure(w);
        DocaException.check(affinity != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null affinity");
        this.euId = affinity.get();
    }

    /** Rank {@code rank} of {@code g} ({@link DocaDpaThreadGroup#setThread}); before start, once. */
    void joinGroup(String w, DocaDpaThreadGroup g, int rank) {
        configure(w);
        DocaException.check(group == null, DocaError.DOCA_ERROR_ALREADY_EXIST, w + ": the thread is rank " + this.rank + " of a group already");
        this.group = g;
        this.rank = rank;
    }

    /** The DPA context this thread belongs to. */
    DocaDpa dpa() {
        return dpa;
    }

    /** Whether {@link #start} made the DPA thread (and {@link #stop} or destroy did not take it). */
    boolean started() {
        return state == State.STARTED || state == State.RUNNING;
    }

    private void configure(String w) {
        DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the thread was destroyed");
        DocaException.check(state == State.CREATED || state == State.STOPPED, DocaError.DOCA_ERROR_BAD_STATE,
                w + ": the thread is " + state.name().toLowerCase() + " (before doca_dpa_thread_start only)");
    }

    /**
     * {@code doca_dpa_thread_start}: creates the DPA thread (not yet triggerable: {@link #run}).
     *
     * @throws DocaException BAD_STATE (started, no function), DRIVER (FlexIO refused it: an EU
     *         outside the partition names itself), NO_MEMORY
     */
    public void start() {
        String w = "doca_dpa_thread_start";
        configure(w);
        DocaException.check(func != null, DocaError.DOCA_ERROR_BAD_STATE, w + ": no function (doca_dpa_thread_set_func_arg first)");
        dpa.lock.lock();
        try {
            block = dpa.memAlloc(DocaDpaDev.RANK_BLOCK_SIZE);
            ByteBuffer b = ByteBuffer.allocate(DocaDpaDev.RANK_BLOCK_SIZE).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(DocaDpaDev.OFF_RANK, rank).putInt(DocaDpaDev.OFF_NUM_THREADS, group == null ? 1 : group.numThreads()).putLong(DocaDpaDev.OFF_LOCAL_STORAGE, localStorage)
                    .putLong(DocaDpaDev.OFF_LOG_STREAM, dpa.logStream()).putLong(DocaDpaDev.OFF_TRACE, dpa.traceArea())
                    .putInt(DocaDpaDev.OFF_WINDOW, dpa.windowId());
            dpa.h2dMemcpy(block, b.array());
            FlexioEventHandler.AffinityType aff = euId < 0 ? FlexioEventHandler.AffinityType.NONE : FlexioEventHandler.AffinityType.STRICT;
            handler = FlexioEventHandler.create(dpa.process(w), new FlexioEventHandler.Attr(func, false, arg, block, aff, Math.max(euId, 0)));
            state = State.STARTED;
        } catch (FlexioException e) {
            dpa.memFree(block);
            block = 0;
            throw DocaDpa.flexio(w, e);
        } finally {
            dpa.lock.unlock();
        }
    }

    /** {@code doca_dpa_thread_run}: the thread becomes triggerable. BAD_STATE unless started. */
    public void run() {
        String w = "doca_dpa_thread_run";
        dpa.lock.lock(); // the state changes under the lock dpa:doca reads it with
        try {
            DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the thread was destroyed");
            DocaException.check(state == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE,
                    w + ": the thread is " + state.name().toLowerCase() + " (doca_dpa_thread_start first, run once)");
            DocaException.check(group == null || group.isStarted(), DocaError.DOCA_ERROR_BAD_STATE,
                    w + ": the thread is rank " + rank + " of a thread group not started (doca_dpa_thread_group_start first)");
            handler.run();
            state = State.RUNNING;
        } catch (FlexioException e) {
            throw DocaDpa.flexio(w, e);
        } finally {
            dpa.lock.unlock();
        }
    }

    /**
     * {@code doca_dpa_thread_stop}: the DPA thread goes (a running activation is stopped with it).
     * BAD_STATE unless started, IN_USE while a started completion context triggers it.
     */
    public void stop() {
        String w = "doca_dpa_thread_stop";
        dpa.lock.lock(); // the DPA thread and the state go in one hold: no reader sees a started thread without one
        try {
            DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the thread was destroyed");
            DocaException.check(state == State.STARTED || state == State.RUNNING, DocaError.DOCA_ERROR_BAD_STATE, w + ": the thread is not started");
            release();
            state = State.STOPPED;
        } finally {
            dpa.lock.unlock();
        }
    }

    /** {@code doca_dpa_thread_destroy}: stops a started thread first (IN_USE while a started completion context triggers it); INVALID_VALUE the second time. */
    public void destroy() {
        String w = "doca_dpa_thread_destroy";
        dpa.lock.lock();
        try {
            DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the thread was destroyed already");
            if (state == State.STARTED || state == State.RUNNING) {
                release();
            }
            state = State.DESTROYED;
            dpa.detach(this);
        } finally {
            dpa.lock.unlock();
        }
    }

    /** The DPA thread and the runtime block go; the caller holds the context's lock and sets the state in the same hold. */
    private void release() {
        assert dpa.lock.isHeldByCurrentThread();
        DocaException.check(startedCompletions == 0, DocaError.DOCA_ERROR_IN_USE,
                "doca_dpa_thread_stop/destroy: " + startedCompletions + " started completion context(s) trigger this thread (stop them first)");
        handler.destroy();
        handler = null;
        dpa.memFree(block);
        block = 0;
    }

    /** The DPA_THREAD id while started (a notification completion's handle names it) [model]. */
    int threadId(String w) {
        DocaException.check(state == State.STARTED || state == State.RUNNING, DocaError.DOCA_ERROR_BAD_STATE,
                w + ": the thread is " + state.name().toLowerCase() + " (doca_dpa_thread_start first)");
        return handler.id();
    }

    /** A notification completion or completion context now triggers this thread (shown by {@code dpa:doca}). */
    void attachCompletion(Object completion) {
        completions.add(completion);
    }

    /** It no longer does (stopped or destroyed). */
    void detachCompletion(Object completion) {
        completions.remove(completion);
    }

    /** This thread as {@link DocaDpaObjects} shows it (the caller holds the context's lock, as {@link #release} does). */
    DocaDpaObjects.Thread snapshot() {
        assert dpa.lock.isHeldByCurrentThread();
        int n;
        try {
            n = activations();
        } catch (RuntimeException e) { // the DPA process ended under it: the count is gone with it
            n = -1;
        }
        return new DocaDpaObjects.Thread(func == null ? "-" : func.name(), arg, state.name().toLowerCase(java.util.Locale.ROOT), euId, n,
                completions.stream().map(String::valueOf).toList());
    }

    /** Started completion contexts bound to the thread (their CQs name it); guarded by the DPA context's lock. */
    private int startedCompletions;

    /** A completion context bound ({@code +1}, at its start) or unbound ({@code -1}, at its stop); the caller holds the context's lock. */
    void completionBound(int delta) {
        assert dpa.lock.isHeldByCurrentThread();
        startedCompletions += delta;
    }

    /** Whether {@link #run} was called (and the thread not stopped since). */
    boolean running() {
        return state == State.RUNNING;
    }

    /** The FlexIO event handler while started (a completion context's CQ names it). */
    FlexioEventHandler handler() {
        return handler;
    }

    /** Activations so far (for {@code dpa:} commands and tests); 0 unless started. */
    public int activations() {
        return handler == null ? 0 : handler.activations();
    }

    @Override
    public String toString() {
        return "doca_dpa_thread " + (func == null ? "-" : func.name()) + " " + state.name().toLowerCase() + (euId < 0 ? "" : ", EU " + euId);
    }
}
