package org.peerdirect.doca.dpa;

import java.time.Duration;
import java.util.Objects;

import org.peerdirect.doca.DocaDpaContext;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.flexio.FlexioApp;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.flexio.FlexioProcess;

/**
 * {@code struct doca_dpa}: the host side of one DPA process on a BlueField-3 ({@code doca_dpa.h}),
 * built on FlexIO: {@link #start} creates the {@link FlexioProcess} of the context's app, the heap
 * calls are the process's heap, {@link #rpc} is {@code flexio_process_call}, and kernel launches go
 * through a {@link KernelDispatcher}. What DOCA Core calls on it ({@code DocaDpaContext}: sync
 * event counters, keys and handles) is {@link DocaDpaCoreSide}'s; the device log's and trace's
 * state is {@link DocaDpaLog}'s and {@link DocaDpaTrace}'s.
 *
 * <p>Threads: DOCA documents every DOCA DPA object as not thread-safe; so is this one (one caller at
 * a time). Its lock only orders the user's calls against the launch dispatcher's thread and
 * {@link #stop}.
 *
 * <p>Errors are {@code doca_error_t} ({@link DocaException}): a call in the wrong state is
 * BAD_STATE, bad arguments INVALID_VALUE, a device without a DPA NOT_SUPPORTED, a FlexIO failure
 * DRIVER (its message carries FlexIO's), a heap without room NO_MEMORY, a FlexIO timeout TIME_OUT.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+dpa/index.html">DOCA DPA</a>
 */
public final class DocaDpa extends DocaDpaCoreSide implements DocaDpaContext {

    /** PCI device id of a BlueField-3's ConnectX-7 function, the only device with a DPA here. */
    static final int BLUEFIELD3_DEVICE_ID = 0xa2dc;

    private enum State {
        CREATED, STARTED, STOPPED, DESTROYED
    }

    private final DocaDev dev;
    private State state = State.CREATED;
    private FlexioApp app;
    private FlexioProcess process;
    private KernelDispatcher dispatcher;
    private WaitComparison waitComparison = WaitComparison.GT;
    /** The device log's level, path and stream ({@link DocaDpaLog}; set before start, under {@link #lock}). */
    private final DocaDpaLog log = new DocaDpaLog();
    /** The device trace's path and area ({@link DocaDpaTrace}; set before start, under {@link #lock}). */
    private final DocaDpaTrace trace = new DocaDpaTrace();
    /** The window of {@code doca_dpa_dev_mmap_get_external_ptr} (the runtime block's {@code OFF_WINDOW}), from start to stop. */
    private org.peerdirect.flexio.FlexioWindow window;
    /** Threads created on this context and not destroyed (guarded by {@link #lock}). */
    private final java.util.List<DocaDpaThread> threads = new java.util.ArrayList<>();
    /** Kernel launch counts over the context's life, for {@link DocaDpaObjects} (its own monitor). */
    final LaunchStats launchStats = new LaunchStats();

    /**
     * How a kernel's wait event passes its threshold. DOCA does not say whether "passes" is {@code >}
     * or {@code >=} (DPA.md §3.2: the DS sample fits both, Seed 001's chain needs {@code >=}); a
     * switch until a primary source settles it. The default is {@code >}, DOCA's {@code wait_gt}.
     */
    public enum WaitComparison {
        GT, GE;

        boolean passes(long value, long threshold) {
            return this == GT ? Long.compareUnsigned(value, threshold) > 0 : Long.compareUnsigned(value, threshold) >= 0;
        }
    }

    private DocaDpa(DocaDev dev) {
        this.dev = dev;
    }

    /**
     * {@code doca_dpa_create}: a DPA context on {@code dev}.
     *
     * @throws DocaException INVALID_VALUE (null or closed device), NOT_SUPPORTED (the device has
     *         no DPA: only a BlueField-3 has one)
     */
    public static DocaDpa create(DocaDev dev) {
        String w = "doca_dpa_create";
        DocaException.check(dev != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null device");
        dev.checkOpen(w);
        DocaException.check(capIsSupported(dev), DocaError.DOCA_ERROR_NOT_SUPPORTED,
                w + ": device " + dev.name() + " has no DPA (only a BlueField-3, PCI device 0x" + Integer.toHexString(BLUEFIELD3_DEVICE_ID) + ", has)");
        DocaDpa d = new DocaDpa(dev);
        dev.hold(d);
        DocaDpaRegistry.add(d);
        return d;
    }

    /** {@code doca_dpa_cap_is_supported}: whether {@code dev} reports a DPA capability block ({@link DocaDpaCaps}). */
    public static boolean capIsSupported(DocaDev dev) {
        Objects.requireNonNull(dev, "dev");
        return DocaDpaCaps.supported("doca_dpa_cap_is_supported", dev.ibvContext());
    }

    /** {@code doca_dpa_cap_is_supported(devinfo)}: see {@link DocaDpaCaps#capIsSupported}. */
    public static boolean capIsSupported(org.peerdirect.doca.dev.DocaDevinfo devinfo) {
        return DocaDpaCaps.capIsSupported(devinfo);
    }

    // ------------------------------------------------------------------ resource queries (DocaDpaCaps)

    /** The device's DPA capability block, read on the first query (guarded by {@link #lock}). */
    private DocaDpaCaps caps;

    /** The capability block behind the resource queries; INVALID_VALUE once destroyed. */
    DocaDpaCaps caps(String w) {
        lock.lock();
        try {
            DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the DPA context was destroyed");
            if (caps == null) {
                caps = DocaDpaCaps.query(w, dev.ibvContext());
            }
            return caps;
        } finally {
            lock.unlock();
        }
    }

    /** {@code doca_dpa_get_total_num_eus_available}: the partition's EUs, the bound of EU ids (see {@link DocaDpaCaps}). */
    public int getTotalNumEusAvailable() {
        return caps("doca_dpa_get_total_num_eus_available").harts();
    }

    /** {@code doca_dpa_get_core_num}. */
    public int getCoreNum() {
        return caps("doca_dpa_get_core_num").cores();
    }

    /** {@code doca_dpa_get_num_eus_per_core}. */
    public int getNumEusPerCore() {
        return caps("doca_dpa_get_num_eus_per_core").hartsPerCore();
    }

    /** {@code doca_dpa_get_max_threads_per_kernel}: a launch with more threads is refused (INVALID_VALUE). */
    public int getMaxThreadsPerKernel() {
        return caps("doca_dpa_get_max_threads_per_kernel").maxThreadsPerKernel();
    }

    /** {@code doca_dpa_get_kernel_max_run_time}: seconds a kernel may run before the DPA OS's watchdog ends the process. */
    public long getKernelMaxRunTime() {
        return caps("doca_dpa_get_kernel_max_run_time").kernelMaxRunTime();
    }

    @Override
    public DocaDev dev() {
        return dev;
    }

    /** {@code doca_dpa_set_app}: the application ({@code dpacc}'s {@code <App>Stubs.APP}); before start. */
    public void setApp(FlexioApp app) {
        lock.lock();
        try {
            checkState("doca_dpa_set_app", State.CREATED);
            DocaException.check(app != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_dpa_set_app: null app");
            this.app = app;
        } finally {
            lock.unlock();
        }
    }

    /** The threshold comparison of kernel launches (see {@link WaitComparison}); before start. */
    public void setWaitComparison(WaitComparison c) {
        lock.lock();
        try {
            checkState("doca_dpa set_wait_comparison", State.CREATED);
            waitComparison = Objects.requireNonNull(c, "comparison");
        } finally {
            lock.unlock();
        }
    }

    /** {@code doca_dpa_set_log_level}: the device log's level (10 disable .. 60 debug); before start. */
    public void setLogLevel(int level) {
        beforeStart("doca_dpa_set_log_level", () -> log.setLevel(level));
    }

    /** {@code doca_dpa_log_file_set_path}: the device log's lines go to this file (appended) instead of standard output; before start. */
    public void logFileSetPath(String path) {
        beforeStart("doca_dpa_log_file_set_path", () -> log.setPath(path));
    }

    /** {@code doca_dpa_trace_file_set_path}: the device trace's lines go to this file (appended) instead of standard output; before start. */
    public void traceFileSetPath(String path) {
        beforeStart("doca_dpa_trace_file_set_path", () -> trace.setPath(path));
    }

    /**
     * Records of {@code doca_dpa_dev_trace} dropped because the trace buffer was full, as read when
     * the context stopped (0 before). Not a DOCA call [model]: the trace file says it too.
     */
    public long traceDropped() {
        lock.lock();
        try {
            return trace.dropped();
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code doca_dpa_start}: loads the app into a new DPA process.
     *
     * @throws DocaException BAD_STATE (started, or no app set), DRIVER (FlexIO refused the process:
     *         an image the verifier refuses names its rule)
     */
    public void start() {
        String w = "doca_dpa_start";
        lock.lock();
        try {
            checkState(w, State.CREATED);
            DocaException.check(app != null, DocaError.DOCA_ERROR_BAD_STATE, w + ": no app (doca_dpa_set_app first)");
            try {
                process = FlexioProcess.create(dev.ibvContext(), app, new FlexioProcess.Attr(4L << 20, Duration.ofSeconds(30)));
            } catch (FlexioException e) {
                throw flexio(w, e);
            }
            try {
                log.open(process);
                trace.open(process);
                window = org.peerdirect.flexio.FlexioWindow.create(process, process.pdn());
            } catch (FlexioException e) {
                process.destroy();
                process = null;
                throw flexio(w, e);
            }
            dispatcher = new KernelDispatcher(this, process, waitComparison);
            state = State.STARTED;
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code doca_dpa_stop}: the launch dispatcher ends (launches not finished fail), then the DPA
     * process is destroyed with everything in it.
     *
     * @throws DocaException BAD_STATE when not started, IN_USE while DPA threads live (destroy them first)
     */
    public void stop() {
        KernelDispatcher d;
        lock.lock();
        try {
            checkState("doca_dpa_stop", State.STARTED);
            DocaException.check(threads.isEmpty(), DocaError.DOCA_ERROR_IN_USE,
                    "doca_dpa_stop: " + threads.size() + " DPA thread(s) not destroyed: " + threads);
            state = State.STOPPED;
            d = dispatcher;
            dispatcher = null;
        } finally {
            lock.unlock();
        }
        d.shutdown(); // outside the lock: the dispatcher's thread takes it
        lock.lock();
        try {
            trace.drain(process); // the trace's end of run
            process.destroy(); // the log stream and the window with it
            window = null;
            process = null;
            log.closed();
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code doca_dpa_destroy}.
     *
     * @throws DocaException IN_USE while started (stop first), INVALID_VALUE when destroyed already
     */
    public void destroy() {
        lock.lock();
        try {
            DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_dpa_destroy: destroyed already");
            DocaException.check(state != State.STARTED, DocaError.DOCA_ERROR_IN_USE, "doca_dpa_destroy: the context is started (doca_dpa_stop first)");
            state = State.DESTROYED;
            dev.unhold(this);
            DocaDpaRegistry.remove(this);
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ memory

    /** The heap calls below ({@link DocaDpaMem}: under {@link #lock}, BAD_STATE unless started, FlexIO's errors as DOCA's). */
    private final DocaDpaMem mem = new DocaDpaMem(this);

    /**
     * {@code doca_dpa_mem_alloc}: {@code size} bytes of the process's heap; their DPA address.
     *
     * @throws DocaException BAD_STATE (not started), INVALID_VALUE (size 0), NO_MEMORY (no room)
     */
    public long memAlloc(long size) {
        return mem.alloc(size);
    }

    /** {@code doca_dpa_mem_free}: INVALID_VALUE for an address that is no allocation of this context. */
    @Override
    public void memFree(long daddr) {
        mem.free(daddr);
    }

    /** {@code doca_dpa_memset}: {@code size} bytes at {@code daddr} set to {@code value}. */
    public void memset(long daddr, int value, long size) {
        mem.memset(daddr, value, size);
    }

    /** {@code doca_dpa_h2d_memcpy}: {@code src} into DPA memory at {@code daddr}; returns when the bytes landed. */
    public void h2dMemcpy(long daddr, byte[] src) {
        mem.h2dMemcpy(daddr, src);
    }

    /** {@code doca_dpa_h2d_memcpy} of {@code size} bytes of the device's process memory at {@code haddr}. */
    public void h2dMemcpy(long daddr, long haddr, int size) {
        byte[] b = new byte[size];
        dev.process().read(haddr, b, 0, size);
        h2dMemcpy(daddr, b);
    }

    /**
     * {@code doca_dpa_d2h_memcpy}: {@code size} bytes of DPA memory at {@code daddr}, by RDMA READ of
     * the runtime's loopback QP ([model], DPA_MODEL.md §2.5).
     */
    public byte[] d2hMemcpy(long daddr, int size) {
        return mem.d2hMemcpy(daddr, size);
    }

    /** {@code doca_dpa_d2h_memcpy} into {@code size} bytes of the device's process memory at {@code haddr}. */
    public void d2hMemcpy(long haddr, long daddr, int size) {
        byte[] b = d2hMemcpy(daddr, size);
        dev.process().write(haddr, b, 0, size);
    }

    // DOCA Core's hooks (DocaDpaContext: sync event counters, keys and handles): DocaDpaCoreSide

    // ------------------------------------------------------------------ RPC

    /**
     * {@code doca_dpa_rpc}: runs {@code __dpa_rpc__} {@code func} once with {@code args}; its
     * {@code uint64_t} result.
     *
     * @throws DocaException BAD_STATE (not started), INVALID_VALUE (arguments its pack function
     *         refuses, an entry that is not an RPC of the app), DRIVER (the process ended: its
     *         status in the message), TIME_OUT
     */
    public long rpc(FlexioFunc func, Object... args) {
        String w = "doca_dpa_rpc";
        lock.lock();
        try {
            checkState(w, State.STARTED);
            DocaException.check(func != null && func.kind() == FlexioFunc.Kind.RPC, DocaError.DOCA_ERROR_INVALID_VALUE,
                    w + ": " + (func == null ? "null function" : func.name() + " is not a __dpa_rpc__ function"));
            return process.call(func, args);
        } catch (IllegalArgumentException e) {
            throw new DocaException(DocaError.DOCA_ERROR_INVALID_VALUE, w + ": " + e.getMessage(), e);
        } catch (FlexioException e) {
            throw flexio(w, e);
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ kernel launch

    /**
     * {@code doca_dpa_kernel_launch_update_set}: launches {@code nthreads} ranks of
     * {@code __dpa_global__} {@code kernel} once {@code waitEvent} (may be null) passes
     * {@code waitThreshold}; when the last rank ended, {@code compEvent} (may be null) is set to
     * {@code compCount} by that rank, through the event's DPA handle. Returns at once.
     *
     * @throws DocaException BAD_STATE (not started, or the completion event not started),
     *         INVALID_VALUE (nthreads &lt; 1, a function that is not a kernel of the app, arguments
     *         its pack function refuses, a completion event in another DPA context or process)
     */
    public void kernelLaunchUpdateSet(DocaSyncEvent waitEvent, long waitThreshold, DocaSyncEvent compEvent, long compCount,
            int nthreads, FlexioFunc kernel, Object... args) {
        launch("doca_dpa_kernel_launch_update_set", waitEvent, waitThreshold, compEvent, compCount, false, nthreads, kernel, args);
    }

    /** {@code doca_dpa_kernel_launch_update_add}: as {@link #kernelLaunchUpdateSet}, {@code compEvent} increased by {@code compCount}. */
    public void kernelLaunchUpdateAdd(DocaSyncEvent waitEvent, long waitThreshold, DocaSyncEvent compEvent, long compCount,
            int nthreads, FlexioFunc kernel, Object... args) {
        launch("doca_dpa_kernel_launch_update_add", waitEvent, waitThreshold, compEvent, compCount, true, nthreads, kernel, args);
    }

    private void launch(String w, DocaSyncEvent waitEvent, long waitThreshold, DocaSyncEvent compEvent, long compCount, boolean add,
            int nthreads, FlexioFunc kernel, Object[] args) {
        lock.lock();
        try {
            checkState(w, State.STARTED);
            dispatcher.submit(KernelDispatcher.Launch.checked(w, waitEvent, waitThreshold, compEvent, compCount, add, nthreads,
                    () -> caps(w).maxThreadsPerKernel(), kernel, args, this));
        } finally {
            lock.unlock();
        }
    }

    /**
     * Launches submitted and not yet finished (for {@code dpa:} commands and tests), the slots'
     * finished counts read now: a launch whose completion event was seen counts finished.
     */
    public int kernelsPending() {
        KernelDispatcher d = refreshedDispatcher();
        return d == null ? 0 : d.pending();
    }

    /** The dispatcher after its finished counts were read ({@link KernelDispatcher#refresh}), outside the lock; not refreshed when the caller holds the lock. */
    private KernelDispatcher refreshedDispatcher() {
        KernelDispatcher d;
        lock.lock();
        try {
            d = dispatcher;
        } finally {
            lock.unlock();
        }
        if (d != null && !lock.isHeldByCurrentThread()) {
            d.refresh();
        }
        return d;
    }

    /** The status queries (firmware commands) the launch dispatcher made so far, for the tests' command count. */
    long kernelStatusQueries() {
        lock.lock();
        try {
            return dispatcher == null ? 0 : dispatcher.statusQueries.get();
        } finally {
            lock.unlock();
        }
    }

    /** The RPCs the launch dispatcher made to the DPA's dispatcher so far (a submission's, a host update's, a look's), for the tests' count. */
    long kernelKicks() {
        lock.lock();
        try {
            return dispatcher == null ? 0 : dispatcher.kicks.get();
        } finally {
            lock.unlock();
        }
    }

    /** The first failure of a launch (the DPA process ended under it), or null. */
    public DocaException kernelFailure() {
        lock.lock();
        try {
            return dispatcher == null ? null : dispatcher.failure();
        } finally {
            lock.unlock();
        }
    }

    /** The window's id (the runtime block's {@code OFF_WINDOW}); 0 when not started. */
    int windowId() {
        org.peerdirect.flexio.FlexioWindow w = window;
        return w == null ? 0 : w.id();
    }

    /** The trace area's DPA address (the runtime block's {@code OFF_TRACE}); 0 when not started. */
    long traceArea() {
        return trace.daddr();
    }

    /** The device log stream's DPA address (the runtime block's {@code OFF_LOG_STREAM}); 0 when not started. */
    long logStream() {
        return log.daddr();
    }

    // ------------------------------------------------------------------ threads

    /** A new thread of this context (the caller holds {@link #lock}); BAD_STATE unless started. */
    void attach(String w, DocaDpaThread t) {
        checkState(w, State.STARTED);
        threads.add(t);
    }

    void detach(DocaDpaThread t) {
        assert lock.isHeldByCurrentThread();
        threads.remove(t);
    }

    /** The FlexIO process while started (the caller holds {@link #lock}). */
    org.peerdirect.flexio.FlexioProcess process(String w) {
        checkState(w, State.STARTED);
        return process;
    }

    // ------------------------------------------------------------------ DocaDpaObjects

    /**
     * This context as {@link DocaDpaObjects} shows it: threads and state under {@link #lock} (one
     * consistent view), then each event's value (a DPA counter is read through a copy, which takes
     * the lock again: reentrant).
     */
    DocaDpaObjects.Context snapshot() {
        String st;
        String appName;
        int flexio;
        java.util.List<DocaDpaObjects.Thread> ts;
        DocaDpaObjects.Kernels kernels;
        refreshedDispatcher();
        lock.lock();
        try {
            st = state.name().toLowerCase(java.util.Locale.ROOT);
            appName = app == null ? "-" : app.name();
            flexio = process == null ? -1 : process.id();
            ts = threads.stream().map(DocaDpaThread::snapshot).toList();
            kernels = launchStats.snapshot(dispatcher == null ? 0 : dispatcher.pending(), dispatcher == null ? null : dispatcher.failure());
        } finally {
            lock.unlock();
        }
        return new DocaDpaObjects.Context(dev.process().pid(), dev.process().name(), dev.name(), appName, st, flexio, ts,
                syncEvents.snapshot(), kernels);
    }

    /** Whether the process this context belongs to has exited (the registry drops it: the library went with it). */
    boolean processExited() {
        return dev.process().exited();
    }

    // ------------------------------------------------------------------ for DOCA libraries on this context (libdoca_rdma, doca_mmap) [model]

    /** Whether the context is started (the caller holds {@link #lock}). */
    @Override
    boolean started() {
        assert lock.isHeldByCurrentThread();
        return state == State.STARTED;
    }

    @Override
    String stateName() {
        assert lock.isHeldByCurrentThread();
        return state.name().toLowerCase();
    }

    /**
     * The FlexIO process of the started context: what libdoca_rdma builds a DPA data path's queues
     * in ({@code doca_rdma_set_datapath_on_dpa}). Not a DOCA call [model].
     *
     * @throws DocaException BAD_STATE unless started
     */
    public FlexioProcess flexioProcess() {
        lock.lock();
        try {
            return process("doca_dpa (datapath on DPA)");
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ helpers

    /** Runs {@code set} under {@link #lock} while the context is created, not started: the device log's and trace's settings. */
    private void beforeStart(String w, Runnable set) {
        lock.lock();
        try {
            checkState(w, State.CREATED);
            set.run();
        } finally {
            lock.unlock();
        }
    }

    private void checkState(String w, State want) {
        assert lock.isHeldByCurrentThread();
        DocaException.check(state != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the DPA context was destroyed");
        DocaException.check(state == want, DocaError.DOCA_ERROR_BAD_STATE,
                w + ": the DPA context is " + state.name().toLowerCase() + (want == State.STARTED ? " (doca_dpa_start first)" : " (before doca_dpa_start only)"));
    }

    static DocaException flexio(String w, FlexioException e) {
        DocaError err = e.status() == org.peerdirect.flexio.FlexioStatus.TIMEOUT ? DocaError.DOCA_ERROR_TIME_OUT : DocaError.DOCA_ERROR_DRIVER;
        return new DocaException(err, w + ": " + e.getMessage(), e);
    }

    @Override
    public String toString() {
        return "doca_dpa on " + dev.name() + " (" + state.name().toLowerCase() + (app == null ? "" : ", app " + app.name()) + ")";
    }
}
