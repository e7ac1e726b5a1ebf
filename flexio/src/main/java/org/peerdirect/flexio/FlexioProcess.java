package org.peerdirect.flexio;

import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Objects;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.flexio.impl.FlexioFailure;
import org.peerdirect.flexio.impl.HeapAllocator;
import org.peerdirect.flexio.impl.ImageSymbols;
import org.peerdirect.flexio.impl.Loopback;
import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxEventChannel;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxUar;

/**
 * {@code struct flexio_process}: a DPA process a host process created on a BlueField-3 through
 * DevX, holding the application's image, its heap (allocated from the host), its PD and UAR, and
 * every object made in it. {@link #destroy} takes all of them down in reverse order of creation,
 * threads first, so no DPA code runs and no DMA reaches memory after it returned.
 *
 * <p>How it is built ([model] where libflexio's internals are not public, DPA_MODEL.md §2.5): a
 * DPA_MEM receives the image by RDMA WRITE of the runtime's loopback QP through a device mkey over
 * the DPA_MEM's DUMEM; DPA_PROCESS loads it (the silicon verifies it); a device mkey over the heap's
 * DUMEM carries {@link #host2devMemcpy}. {@link #call} triggers the process's RPC handler by an
 * RDMA WRITE-with-immediate and reads the result from a host mailbox the handler writes through a
 * window ({@link FlexioRpc}).
 *
 * <p>Thread-safe: one lock serialises the process's commands, its loopback QP and its heap.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_process_create, flexio_process_destroy</a>
 */
public final class FlexioProcess implements AutoCloseable {

    /**
     * {@code struct flexio_process_attr} and the model's sizes: the heap's bytes and how long a
     * blocking call ({@link #call}, a copy) waits before {@link FlexioStatus#TIMEOUT}.
     */
    public record Attr(long heapSize, Duration timeout) {
        public Attr {
            if (heapSize <= 0) {
                throw new IllegalArgumentException("a DPA process needs a heap, not " + heapSize + " bytes");
            }
            Objects.requireNonNull(timeout, "timeout");
        }

        /** 1 MiB of heap, 20 s. */
        public static Attr defaults() {
            return new Attr(1 << 20, Duration.ofSeconds(20));
        }
    }

    /** {@code struct flexio_process_mem_info}. */
    public record MemInfo(long base, long size, long requested, long allocated) {
    }

    final IbvContext ctx;
    final FlexioApp app;
    final ImageSymbols symbols;
    final Attr attr;
    final ReentrantLock lock = new ReentrantLock();
    private final DevxObj pd;
    private final int pdn;
    private final DevxUar uar;
    private final Loopback loopback;
    private final DevxObj image;
    private final DevxObj imageMkey;
    /** The DPA_PROCESS object (package-private: the tests subscribe their own DevX channel to it). */
    final DevxObj process;
    private final int dumemId;
    private final HeapAllocator heap;
    private final DevxObj heapMkey;
    private final DevxEventChannel errChannel;
    /** Objects made in the process, destroyed newest first (guarded by {@link #lock}). */
    private final Deque<Runnable> children = new ArrayDeque<>();
    /** The RPC channel, made at the first {@link #call} (guarded by {@link #lock}). */
    private FlexioRpc rpc;
    private boolean destroyed;

    private FlexioProcess(IbvContext ctx, FlexioApp app, Attr attr) {
        this.ctx = ctx;
        this.app = app;
        this.attr = attr;
        this.symbols = ImageSymbols.of(app.image());
        for (FlexioFunc f : app.funcs()) {
            if (symbols.indexOf(f.name()) < 0) {
                throw new IllegalArgumentException("app " + app.name() + " registers " + f.name() + ", which its image lacks");
            }
        }
        Deque<Runnable> undo = new ArrayDeque<>();
        try {
            pd = Prm.allocPd(ctx);
            undo.push(() -> Mlx5dv.devxObjDestroy(pd));
            pdn = Prm.index(pd);
            uar = Mlx5dv.devxAllocUar(ctx);
            undo.push(() -> Mlx5dv.devxFreeUar(uar));
            loopback = new Loopback(ctx, pdn, uar, attr.timeout());
            undo.push(loopback::close);
            byte[] img = app.image();
            image = Prm.create(ctx, OBJ_DPA_MEM, c -> set64(c, MEM_SIZE, img.length));
            undo.push(() -> Mlx5dv.devxObjDestroy(image));
            MemorySegment mem = Prm.createdContext(image);
            long imageDaddr = get64(mem, MEM_DADDR);
            imageMkey = Mlx5dv.devxObjCreate(ctx, Prm.createUmemMkey(pdn, imageDaddr, img.length, MEM_DUMEM_ID.get(mem, 0), 0), 16);
            undo.push(() -> Mlx5dv.devxObjDestroy(imageMkey));
            loopback.write(img, 0, img.length, imageDaddr, Prm.index(imageMkey) << 8);
            process = Prm.createProcess(ctx, c -> {
                PROCESS_IMAGE_MEM.set(c, 0, Prm.objId(image));
                PROCESS_IMAGE_LEN.set(c, 0, img.length);
                set64(c, PROCESS_HEAP_SIZE, attr.heapSize());
                PROCESS_PD.set(c, 0, pdn);
                PROCESS_UAR.set(c, 0, uar.page());
            });
            undo.push(() -> Mlx5dv.devxObjDestroy(process));
            MemorySegment p = Prm.createdContext(process);
            heap = new HeapAllocator(get64(p, PROCESS_HEAP_BASE), attr.heapSize());
            dumemId = PROCESS_DUMEM_ID.get(p, 0);
            heapMkey = Mlx5dv.devxObjCreate(ctx, Prm.createUmemMkey(pdn, heap.base(), heap.size(), dumemId, 0), 16);
            undo.push(() -> Mlx5dv.devxObjDestroy(heapMkey));
            errChannel = Mlx5dv.devxCreateEventChannel(ctx);
            undo.push(() -> Mlx5dv.devxDestroyEventChannel(errChannel));
            Mlx5dv.devxSubscribeDevxEvent(errChannel, process, new int[] {Eq.EVENT_OBJECT_CHANGE}, Prm.objId(process));
        } catch (RuntimeException e) {
            while (!undo.isEmpty()) {
                try {
                    undo.pop().run();
                } catch (RuntimeException suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            throw failure("flexio_process_create of app " + app.name(), e);
        }
    }

    /**
     * {@code flexio_process_create}: a DPA process of {@code app} on the device of {@code ctx}
     * (a BlueField-3 context of the calling process).
     *
     * @throws FlexioException FAILED naming the refused command (an image the verifier refuses
     *         names its rule), TIMEOUT when the image copy did not complete
     */
    public static FlexioProcess create(IbvContext ctx, FlexioApp app, Attr attr) {
        Objects.requireNonNull(ctx, "ibv_context");
        Objects.requireNonNull(app, "app");
        return new FlexioProcess(ctx, app, attr == null ? Attr.defaults() : attr);
    }

    static FlexioException failure(String what, RuntimeException e) {
        if (e instanceof FlexioException f) {
            return f;
        }
        int status = e instanceof FlexioFailure f ? f.status : FlexioStatus.FAILED;
        return new FlexioException(status, what + ": " + e.getMessage(), e);
    }

    boolean alive() {
        assert lock.isHeldByCurrentThread();
        return !destroyed;
    }

    void checkAlive() {
        assert lock.isHeldByCurrentThread();
        if (destroyed) {
            throw new FlexioException(FlexioStatus.FAILED, "flexio process " + id() + " of app " + app.name() + " was destroyed");
        }
    }

    // ------------------------------------------------------------------ getters

    /** The DPA_PROCESS object id ({@code flexio_process_get_id}). */
    public int id() {
        return Prm.objId(process);
    }

    /** {@code flexio_process_get_pd}: the PD number of the process's PD. */
    public int pdn() {
        return pdn;
    }

    /** {@code flexio_process_get_uar}: the process's UAR (outboxes ring queues of this UAR's uid). */
    public DevxUar uar() {
        return uar;
    }

    /** {@code flexio_process_get_dumem_id}: the umem naming the process's heap. */
    public int dumemId() {
        return dumemId;
    }

    public IbvContext ibvContext() {
        return ctx;
    }

    public FlexioApp app() {
        return app;
    }

    DevxObj processObj() {
        return process;
    }

    int entryIndex(FlexioFunc f, FlexioFunc.Kind kind) {
        int i = symbols.indexOf(app.func(f.name()).name());
        if (f.kind() != kind) {
            throw new IllegalArgumentException(f.name() + " is a " + f.kind() + " entry, not " + kind);
        }
        return i;
    }

    /** Adds an object's destroy to the process's teardown (newest first); returns a handle to take it out. */
    Runnable own(Runnable destroy) {
        assert lock.isHeldByCurrentThread();
        children.push(destroy);
        return destroy;
    }

    void disown(Runnable destroy) {
        assert lock.isHeldByCurrentThread();
        children.remove(destroy);
    }

    // ------------------------------------------------------------------ heap

    /**
     * {@code flexio_buf_dev_alloc}: a block of the heap of at least {@code size} bytes (64-byte
     * aligned), or 0 when the heap has no room (the C call's daddr 0 with FAILED).
     */
    public long bufDevAlloc(long size) {
        lock.lock();
        try {
            checkAlive();
            return heap.alloc(size);
        } finally {
            lock.unlock();
        }
    }

    /** {@code flexio_buf_dev_free}: FAILED for an address that is no block of this heap. */
    public int bufDevFree(long daddr) {
        lock.lock();
        try {
            checkAlive();
            return heap.free(daddr) ? FlexioStatus.SUCCESS : FlexioStatus.FAILED;
        } finally {
            lock.unlock();
        }
    }

    /** {@code flexio_buf_dev_memset}: {@code size} bytes at {@code daddr} set to {@code value}. */
    public void bufDevMemset(int value, long size, long daddr) {
        byte[] b = new byte[Math.toIntExact(size)];
        java.util.Arrays.fill(b, (byte) value);
        host2devMemcpy(b, daddr);
    }

    /** {@code flexio_process_mem_info_get}. */
    public MemInfo processMemInfoGet() {
        lock.lock();
        try {
            return new MemInfo(heap.base(), heap.size(), heap.requested(), heap.allocated());
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code flexio_host2dev_memcpy}: {@code src} into the heap at {@code daddr}, by RDMA WRITE of
     * the loopback QP through the heap's device mkey; returns when the last byte landed.
     *
     * @throws FlexioException FAILED for a range outside the heap or a failed WRITE, TIMEOUT
     */
    public void host2devMemcpy(byte[] src, long daddr) {
        lock.lock();
        try {
            checkAlive();
            if (!heap.contains(daddr, src.length)) {
                throw new FlexioException(FlexioStatus.FAILED, String.format("host2dev_memcpy: [0x%x, +%d) is outside the heap"
                        + " [0x%x, +%d)", daddr, src.length, heap.base(), heap.size()));
            }
            loopback.write(src, 0, src.length, daddr, Prm.index(heapMkey) << 8);
        } catch (RuntimeException e) {
            throw failure("flexio_host2dev_memcpy", e);
        } finally {
            lock.unlock();
        }
    }

    /** {@code flexio_host2dev_memcpy} of {@code size} bytes of the calling process's memory at {@code haddr}. */
    public void host2devMemcpy(long haddr, int size, long daddr) {
        byte[] b = new byte[size];
        ctx.process().read(haddr, b, 0, size);
        host2devMemcpy(b, daddr);
    }

    /**
     * {@code size} bytes of the heap at {@code daddr}, by RDMA READ of the loopback QP through the
     * heap's device mkey. [model] libflexio has no such call; DOCA DPA's {@code doca_dpa_d2h_memcpy}
     * is built on it (DPA_MODEL.md §2.5).
     *
     * @throws FlexioException FAILED for a range outside the heap or a failed READ, TIMEOUT
     */
    public byte[] dev2hostMemcpy(long daddr, int size) {
        lock.lock();
        try {
            checkAlive();
            if (size < 0 || !heap.contains(daddr, size)) {
                throw new FlexioException(FlexioStatus.FAILED, String.format("dev2host_memcpy: [0x%x, +%d) is outside the heap"
                        + " [0x%x, +%d)", daddr, size, heap.base(), heap.size()));
            }
            byte[] b = new byte[size];
            loopback.read(b, 0, size, daddr, Prm.index(heapMkey) << 8);
            return b;
        } catch (RuntimeException e) {
            throw failure("dev2host_memcpy", e);
        } finally {
            lock.unlock();
        }
    }

    /** {@code flexio_copy_from_host}: a new heap block holding {@code src}; its address. */
    public long copyFromHost(byte[] src) {
        long d = bufDevAlloc(src.length);
        if (d == 0) {
            throw new FlexioException(FlexioStatus.FAILED, "flexio_copy_from_host: no room for " + src.length + " bytes in the heap");
        }
        try {
            host2devMemcpy(src, d);
        } catch (FlexioException e) {
            bufDevFree(d);
            throw e;
        }
        return d;
    }

    // ------------------------------------------------------------------ RPC

    /** RTOS thread states as the DPA_THREAD query reports them (hca-sim's {@code ThreadState} order). */
    static final int STATE_WAITING = 3;
    static final int STATE_FINISHED = 5;

    /**
     * {@code flexio_process_call}: runs {@code __dpa_rpc__} entry {@code func} once with
     * {@code args} (packed by its pack function) and returns its {@code uint64_t} result. Through
     * the data path ([model], DPA_MODEL.md §2.5, {@link FlexioRpc}): an RDMA WRITE-with-immediate
     * carries the arguments into the heap and triggers the process's RPC handler (flexio-dev's
     * {@code flexio_dev_rpc_handler}), which calls the entry and writes the result back into a
     * host mailbox through a window; the host polls it, bounded by the process's timeout. The
     * channel is made at the first call.
     *
     * @throws FlexioException FAILED when the process ended (its status and
     *         {@link #errStatusGet} say how, e.g. a device {@code flexio_dev_error}) or the image
     *         lacks flexio-dev's RPC handler; TIMEOUT
     */
    public long call(FlexioFunc func, Object... args) {
        byte[] argbuf = func.packArgs(args);
        lock.lock();
        try {
            checkAlive();
            int index = entryIndex(func, FlexioFunc.Kind.RPC);
            if (rpc == null) {
                rpc = FlexioRpc.create(this, Prm.index(heapMkey) << 8);
            }
            return rpc.call(index, argbuf, func.name());
        } catch (RuntimeException e) {
            throw failure("flexio_process_call of " + func.name(), e);
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@link #call} of a runtime library's {@code __dpa_rpc__} entry named by its symbol, not one of
     * the app's functions ([model]: DOCA DPA's kernel runtime, {@code doca_dpa_dev_kernel_start},
     * which dpacc links into images using doca-dpa-dev), with its one {@code uint64_t} argument.
     * The same data path: one WRITE-with-immediate, the answer in the mailbox.
     *
     * @throws FlexioException FAILED when the image has no such symbol or the process ended; TIMEOUT
     */
    public long callRuntime(String symbol, long arg) {
        byte[] argbuf = java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(arg).array();
        lock.lock();
        try {
            checkAlive();
            int index = symbols.indexOf(symbol);
            if (index < 0) {
                throw new FlexioException(FlexioStatus.FAILED, "app " + app.name() + "'s image has no runtime entry " + symbol);
            }
            if (rpc == null) {
                rpc = FlexioRpc.create(this, Prm.index(heapMkey) << 8);
            }
            return rpc.call(index, argbuf, symbol);
        } catch (RuntimeException e) {
            throw failure("flexio_process_call of " + symbol, e);
        } finally {
            lock.unlock();
        }
    }

    /** Whether the image has an entry named {@code symbol} (a runtime library linked in, e.g.). */
    public boolean hasSymbol(String symbol) {
        return symbols.indexOf(symbol) >= 0;
    }

    /** The image's symbol index of {@code symbol} (what {@code Dpa.call} takes), -1 when there is none. */
    public int symbolIndex(String symbol) {
        return symbols.indexOf(symbol);
    }

    /** The status queries {@link #call}s made while waiting (0 before the first call): the only firmware commands of a call. */
    public long rpcStatusQueries() {
        lock.lock();
        try {
            return rpc == null ? 0 : rpc.statusQueries;
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ errors

    /** The DPA_PROCESS's {@code dpa_process_status} (0 ok, 1..63 RTOS, 0x40 finished, 0x42 illegal, 0x80..0xff user). */
    public int processStatus() {
        lock.lock();
        try {
            checkAlive();
            return PROCESS_STATUS.get(Prm.query(process, OBJ_DPA_PROCESS), 0);
        } finally {
            lock.unlock();
        }
    }

    /** {@code flexio_err_status_get}: {@link FlexioStatus#ERR_NO_ERROR}, {@code _FATAL_ERROR} or {@code _USER_ERROR}. */
    public int errStatusGet() {
        lock.lock();
        try {
            checkAlive();
            return FlexioStatus.errStatusOf(processStatus());
        } finally {
            lock.unlock();
        }
    }

    /** {@code flexio_err_handler_fd}: the DevX event channel the process's error event arrives on. */
    public DevxEventChannel errHandlerFd() {
        return errChannel;
    }

    /**
     * Waits up to {@code timeout} for the error fd to become readable and reads it: true when an
     * error event of this process arrived (a {@code poll} then {@code read} of the fd).
     */
    public boolean errHandlerFdReadable(Duration timeout) {
        lock.lock();
        try {
            checkAlive(); // the channel goes with the process
        } finally {
            lock.unlock();
        }
        Mlx5dv.DevxEvent e = Mlx5dv.devxGetEvent(errChannel, timeout);
        return e != null && e.objId() == id();
    }

    /**
     * {@code flexio_crash_data}: the process's status and each of its threads' state, EU and
     * activations, as text (the model's stand-in for the C call's printout; a coredump in
     * NVIDIA's ELF format is not modelled).
     */
    public String crashData() {
        lock.lock();
        try {
            checkAlive();
            StringBuilder b = new StringBuilder(String.format("flexio process %d (app %s): dpa_process_status 0x%x, flexio_err_status %d%n",
                    id(), app.name(), processStatus(), FlexioStatus.errStatusOf(processStatus())));
            if (rpc != null) {
                b.append(rpc.describe()).append('\n');
            }
            return b.toString();
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ teardown

    /**
     * {@code flexio_process_destroy}: every object made in the process, newest first (threads and
     * queues before windows and outboxes; the RPC channel's among them), then the process, its image, the
     * loopback QP, UAR and PD. A second call does nothing.
     *
     * @throws FlexioException FAILED when a destroy command was refused (the rest still went)
     */
    public void destroy() {
        lock.lock();
        try {
            if (destroyed) {
                return;
            }
            destroyed = true;
            Deque<Runnable> order = new ArrayDeque<>(children);
            children.clear();
            order.add(() -> Mlx5dv.devxObjDestroy(heapMkey));
            order.add(() -> Mlx5dv.devxDestroyEventChannel(errChannel));
            order.add(() -> Mlx5dv.devxObjDestroy(process));
            order.add(() -> Mlx5dv.devxObjDestroy(imageMkey));
            order.add(() -> Mlx5dv.devxObjDestroy(image));
            order.add(loopback::close);
            order.add(() -> Mlx5dv.devxFreeUar(uar));
            order.add(() -> Mlx5dv.devxObjDestroy(pd));
            FlexioException failed = null;
            for (Runnable r : order) {
                try {
                    r.run();
                } catch (KernelException | FlexioFailure e) {
                    if (failed == null) {
                        failed = new FlexioException(FlexioStatus.FAILED, "flexio_process_destroy: " + e.getMessage(), e);
                    } else {
                        failed.addSuppressed(e);
                    }
                }
            }
            if (failed != null) {
                throw failed;
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close() {
        destroy();
    }

    @Override
    public String toString() {
        return "flexio process " + id() + " of app " + app.name();
    }
}
