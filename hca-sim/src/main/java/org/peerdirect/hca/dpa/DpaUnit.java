package org.peerdirect.hca.dpa;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.peerdirect.hca.dpa.isa.Hart;

/**
 * The DPA subsystem of a BlueField-3 function: DPA memory, the execution units, the RTOS, the
 * loader, outboxes, windows and the memory model, behind the operations its firmware performs for
 * the DPA general objects (DPA_MEM, DPA_PROCESS, DPA_THREAD, DPA_OUTBOX, DPA_WINDOW) and the
 * NIC-side entry points (a CQE on an armed thread-bound CQ, NIC reads and writes of DPA memory).
 *
 * <p>Object ids come from one counter. Errors in host requests throw
 * {@link IllegalArgumentException} (the firmware's {@code BAD_PARAM}) or {@link ImageRejected}.
 * Process errors are reported through {@link ErrorEvents} once, the first status winning.
 */
public final class DpaUnit implements AutoCloseable {

    /** The host-side error event (the model's OBJECT_CHANGE EQE on the DPA process). */
    public interface ErrorEvents {
        void processError(int process, int uid, int status, String crash);
    }

    final DpaConfig config;
    final DpaNic nic;
    final WindowPort windowPort;
    private final ErrorEvents events;
    private final LoaderPolicy policy;
    final DpaMemory memory;
    final ExecutionUnits eus;
    final HartScheduler scheduler;
    final Rtos rtos;
    /** Trigger → handler entry, wall clock ({@link #wakeNanos}). */
    final WakeSamples wake = new WakeSamples();
    final MemoryModel mm;
    /** CQs bound to threads, their events, the lost-wake-up check (C7). */
    final DpaCqs cqs;
    /** Check C8: objects in use by a thread ({@code Dpa.objectEnter}). */
    final ObjectUse objects = new ObjectUse(this);
    final Windows windows;
    private final DpaSpace space;
    /** Concurrent mode only (a deterministic hart runs on the driving thread: nothing could take it back). */
    private final WallWatchdog wallWatchdog;
    private final DpaSpace recordSpace;
    private final AtomicInteger ids = new AtomicInteger();
    private final Map<Integer, DpaMemory.Region> mems = new ConcurrentHashMap<>();
    private final Map<Integer, DpaProcess> processes = new ConcurrentHashMap<>();
    private final Map<Integer, DpaThread> threads = new ConcurrentHashMap<>();
    private final Map<Integer, Outbox> outboxes = new ConcurrentHashMap<>();
    private final Map<Integer, Window> windowObjs = new ConcurrentHashMap<>();

    public DpaUnit(DpaConfig config, DpaNic nic, WindowPort windowPort, ErrorEvents events, LoaderPolicy policy) {
        this.config = config;
        this.nic = nic;
        this.windowPort = windowPort;
        this.events = events;
        this.policy = policy;
        this.memory = new DpaMemory(config.memBytes());
        this.eus = new ExecutionUnits(config.eus(), config.reservedEus());
        this.scheduler = config.deterministic() ? new DeterministicScheduler(config.seed())
                : new ConcurrentScheduler(config.budget());
        this.rtos = new Rtos(this);
        this.mm = new MemoryModel(this, config.check(), memory.seg, config.eus());
        this.windows = new Windows(this);
        this.cqs = new DpaCqs(this);
        this.space = new DpaSpace(this, false);
        this.recordSpace = new DpaSpace(this, true);
        this.wallWatchdog = config.deterministic() ? null : WallWatchdog.start(this, config.wallWatchdog());
    }

    /**
     * DPA memory as the NIC's DMA reaches it (device-local, never through the host IOMMU; the
     * memory model's NIC rules): the space of DPA-memory mkeys and of queues whose rings live in
     * DPA memory.
     */
    public org.peerdirect.kernel.dma.DmaPort space() {
        return space;
    }

    /**
     * {@link #space} for doorbell records the NIC polls: a read gives the written-back bytes as
     * any NIC read does, without a C1 finding (a record not yet written back is simply read old;
     * what a doorbell makes the NIC fetch is checked through {@link #space}).
     */
    public org.peerdirect.kernel.dma.DmaPort recordSpace() {
        return recordSpace;
    }

    /**
     * The bench's "CQE written → handler entry": percentiles {@code ps} (0..100) of the wall-clock
     * nanoseconds from a trigger that found its thread waiting to the handler's entry, over the
     * last {@value WakeSamples#CAPACITY} such wakes; {@code reset} starts a new series.
     */
    public long[] wakeNanos(boolean reset, double... ps) {
        long[] r = wake.percentiles(ps);
        if (reset) {
            wake.reset();
        }
        return r;
    }

    /** Wakes sampled since the last reset. */
    public long wakes() {
        return wake.count();
    }

    /** The EUs' counters summed: activations, cycles, instructions retired (the ISA's counters, {@code dpa:eus}). */
    public long[] euTotals() {
        rtos.lock.lock();
        try {
            return eus.totals();
        } finally {
            rtos.lock.unlock();
        }
    }

    public DpaConfig config() {
        return config;
    }

    // ---- DPA_MEM ----

    /** A DPA_MEM object of {@code size} bytes for {@code uid}; returns its id. */
    public int memCreate(int uid, long size) {
        DpaMemory.Region r = memory.alloc(size, -1 - uid);
        int id = ids.incrementAndGet();
        mems.put(id, r);
        return id;
    }

    public long memAddress(int memId) {
        return mem(memId, -1).base();
    }

    public void memDestroy(int memId) {
        DpaMemory.Region r = mems.get(memId);
        if (r == null) {
            throw new IllegalArgumentException("DPA_MEM " + memId + " does not exist");
        }
        mm.forget(r);
        memory.free(r);
        mems.remove(memId);
    }

    private DpaMemory.Region mem(int memId, int uid) {
        DpaMemory.Region r = mems.get(memId);
        if (r == null || (uid >= 0 && r.owner() != -1 - uid)) {
            throw new IllegalArgumentException("DPA_MEM " + memId + (r == null ? " does not exist" : " belongs to another uid"));
        }
        return r;
    }

    /** Host → DPA memory by DMA through the NIC (coherent for DPA threads). */
    public void nicWrite(long daddr, MemorySegment src, long off, long len) {
        checkRange(daddr, len);
        mm.nicWrite(daddr, src, off, len);
    }

    /** A NIC read of DPA memory ({@code what} names it in a C1 report). */
    public void nicRead(long daddr, MemorySegment dst, long off, long len, String what) {
        checkRange(daddr, len);
        mm.nicRead(daddr, dst, off, len, what);
    }

    /**
     * A poll of DPA memory (a host or the NIC polling a flag the DPA writes, by RDMA READ or a
     * status read): the bytes written back, the old ones while a granule is still dirty in an
     * EU's write buffer, and no finding. Polling until the value shows is legal on hardware; C1 is
     * for a fetch a doorbell ordered ({@link #nicRead}).
     */
    public void nicPoll(long daddr, MemorySegment dst, long off, long len) {
        checkRange(daddr, len);
        mm.nicPoll(daddr, dst, off, len);
    }

    /** The NIC takes a receive WQE of {@code len} bytes at {@code wqe} after reading the DBR at {@code dbr} (C6). */
    public void nicFetchRq(long dbr, long wqe, MemorySegment dst, long len) {
        checkRange(wqe, len);
        mm.nicFetchRq(dbr, wqe, dst, len);
    }

    /**
     * {@link #nicFetchRq} as the NIC's DMA engine does it for a queue in DPA memory: a range not
     * allocated is an IOMMU-style fault of {@link #space} (the engine's error paths apply).
     */
    public void nicFetchReceive(long dbr, long wqe, MemorySegment dst, long len) {
        space.fetchReceive(dbr, wqe, dst, len);
    }

    private void checkRange(long daddr, long len) {
        if (memory.regionOf(daddr, len) == null) {
            throw new IllegalArgumentException("DPA memory 0x" + Long.toHexString(daddr) + "+" + len + " is not allocated");
        }
    }

    // ---- DPA_PROCESS ----

    /**
     * Loads the image held by DPA_MEM {@code imageMem} (its first {@code imageLen} bytes), verifies
     * it, defines it in a new process loader, and allocates the process heap.
     */
    public int processCreate(int uid, int pd, int uar, int imageMem, long imageLen, long heapSize) throws ImageRejected {
        DpaMemory.Region img = mem(imageMem, uid);
        if (imageLen <= 0 || imageLen > img.size()) {
            throw new ImageRejected("malformed-image", "DPA_MEM " + imageMem, "length " + imageLen + " beyond " + img.size());
        }
        Image image = Image.parse(memory.seg.asSlice(img.base(), imageLen));
        new Verifier(image, policy).verify();
        int id = ids.incrementAndGet();
        ImageLoader loader = new ImageLoader(ImageLoader.NAME + id, image, policy);
        MethodHandle[] rpcEntries = loader.rpcEntries(image);
        DpaMemory.Region heap = memory.alloc(heapSize, id);
        DpaProcess p = new DpaProcess(id, uid, pd, uar, image, loader, heap, rpcEntries);
        processes.put(id, p);
        return id;
    }

    /** Destroys a process: stops its threads (every EU they hold is released first), then frees everything. */
    public void processDestroy(int pid) {
        DpaProcess p = process(pid);
        if (p.status == ProcessStatus.OK && p.threads.values().stream().anyMatch(t -> t.runner != null)) {
            p.crash = "destroyed by the host while threads ran";
        }
        rtos.endProcess(p);
        if (!rtos.awaitStopped(p, config.wallTimeout())) {
            throw new IllegalStateException("DPA process " + pid + ": a thread did not stop within " + config.wallTimeout()
                    + " (a handler looping without ISA calls)");
        }
        for (DpaThread t : List.copyOf(p.threads.values())) {
            for (WindowEntity e : t.entities) {
                windows.leftDirty(t, e, "process destroy", false);
            }
            threads.remove(t.id);
            cqs.forget(t.id);
        }
        p.outboxes.keySet().forEach(outboxes::remove);
        p.windows.keySet().forEach(windowObjs::remove);
        for (DpaMemory.Region r : p.regions) {
            mm.forget(r);
            memory.free(r);
        }
        objects.forget(pid);
        p.loader = null;
        p.dropEntries(); // the handles hold the loader's classes too
        processes.remove(pid);
    }

    DpaProcess process(int pid) {
        DpaProcess p = processes.get(pid);
        if (p == null) {
            throw new IllegalArgumentException("DPA process " + pid + " does not exist");
        }
        return p;
    }

    public int processStatus(int pid) {
        return process(pid).status;
    }

    public String crashData(int pid) {
        return process(pid).crash;
    }

    public long heapBase(int pid) {
        return process(pid).heap.base();
    }

    /** The heap's bytes (the allocation granule's multiple). */
    public long heapSize(int pid) {
        return process(pid).heap.size();
    }

    /** Ends {@code p} with {@code status} (the first error wins) and tells the host once; on a thread of {@code p}, that thread and its line failed. */
    void fail(DpaProcess p, int status, String message) {
        Runner failing = Hart.CURRENT.isBound() && Hart.CURRENT.get() instanceof Runner r && r.thread.process == p ? r : null;
        fail(p, status, message, failing == null ? -1 : failing.thread.id, failing == null ? "" : Sites.here());
    }

    /** {@link #fail} naming the failing {@code thread} (-1: none) and its handler line {@code site} (a finding's). */
    void fail(DpaProcess p, int status, String message, int thread, String site) {
        boolean first;
        rtos.lock.lock();
        try {
            first = p.status == ProcessStatus.OK;
            if (first) {
                p.status = status;
                p.crash = message;
                p.failedThread = thread;
                p.failedSite = site;
            }
        } finally {
            rtos.lock.unlock();
        }
        rtos.endProcess(p);
        if (first && status != ProcessStatus.PROCESS_FINISH) {
            System.getLogger("peerdirect.dpa").log(System.Logger.Level.INFO, "DPA process " + p.id + " ended, status 0x"
                    + Integer.toHexString(status) + ": " + message);
            events.processError(p.id, p.uid, status, message);
        }
    }

    // ---- DPA_THREAD ----

    public int threadCreate(int pid, String entry, long arg, long tls, Affinity affinity, boolean continuable) {
        DpaProcess p = process(pid);
        Image.Symbol s = p.image.symbols().get(entry);
        if (s == null) {
            throw new IllegalArgumentException("entry " + entry + " is not in process " + pid + "'s image");
        }
        if (tls != 0 && !p.owns(tls, 1)) {
            throw new IllegalArgumentException("thread-local storage 0x" + Long.toHexString(tls) + " is outside process " + pid);
        }
        MethodHandle h;
        try {
            h = p.loader.entry(s);
        } catch (ImageRejected e) {
            throw new IllegalArgumentException(e.getMessage());
        }
        rtos.lock.lock();
        try {
            eus.check(affinity);
            if (p.ended) {
                throw new IllegalArgumentException("DPA process " + pid + " has ended (status 0x" + Integer.toHexString(p.status) + ")");
            }
            int id = ids.incrementAndGet();
            DpaThread t = new DpaThread(id, p, s, h, arg, tls, affinity, continuable);
            p.threads.put(id, t);
            threads.put(id, t);
            return id;
        } finally {
            rtos.lock.unlock();
        }
    }

    DpaThread thread(int tid) {
        DpaThread t = threads.get(tid);
        if (t == null) {
            throw new IllegalArgumentException("DPA thread " + tid + " does not exist");
        }
        return t;
    }

    public void threadRun(int tid) {
        rtos.run(thread(tid));
    }

    /** A host trigger of the thread (a DUAR); false when ignored (finished, latched already, process ended). */
    public boolean trigger(int tid) {
        return rtos.trigger(thread(tid));
    }

    public ThreadState threadState(int tid) {
        rtos.lock.lock();
        try {
            return thread(tid).state;
        } finally {
            rtos.lock.unlock();
        }
    }

    /** The name of the {@code index}th entry of the process's symbol table. */
    public String entryName(int pid, int index) {
        var names = List.copyOf(process(pid).image.symbols().keySet());
        if (index < 0 || index >= names.size()) {
            throw new IllegalArgumentException("entry index " + index + " is not in process " + pid + "'s image ("
                    + names.size() + " entries)");
        }
        return names.get(index);
    }

    /** {EU it runs on or -1, activations} of a thread. */
    public long[] threadStats(int tid) {
        rtos.lock.lock();
        try {
            DpaThread t = thread(tid);
            Runner r = t.runner;
            return new long[] {r == null ? -1 : r.eu, t.activations};
        } finally {
            rtos.lock.unlock();
        }
    }

    public long rpcResult(int tid) {
        return thread(tid).rpcResult;
    }

    /** One line of {@code dpa:threads}, with each bound CQ armed or not. */
    public String describeThread(int tid) {
        return DpaViews.thread(this, thread(tid));
    }

    /** Destroys a thread; a running or suspended one is stopped first (its process goes on). */
    public void threadDestroy(int tid) {
        DpaThread t = thread(tid);
        rtos.stopThread(t);
        if (!rtos.awaitStopped(t.process, false, config.wallTimeout())) {
            throw new IllegalStateException("DPA thread " + tid + " did not stop within " + config.wallTimeout()
                    + " (a handler looping without ISA calls)");
        }
        rtos.lock.lock();
        try {
            t.process.threads.remove(tid);
            threads.remove(tid);
            cqs.forget(tid);
        } finally {
            rtos.lock.unlock();
        }
        for (WindowEntity e : t.entities) {
            windows.leftDirty(t, e, "thread destroy", false);
        }
    }

    boolean activate(DpaThread from, int tid) {
        DpaThread t = threads.get(tid);
        return t != null && t.process == from.process && rtos.trigger(t);
    }

    // ---- NIC side ({@link DpaCqs}) ----

    /** The firmware bound CQ {@code cqn} to thread {@code tid} ({@code cqc.apu_cq}, element type thread). */
    public void bindCq(int cqn, int tid) {
        cqs.bindCq(cqn, tid);
    }

    public void unbindCq(int cqn) {
        cqs.unbindCq(cqn);
    }

    /** A completion event of CQ {@code cqn} whose element is DPA thread {@code tid} ({@link DpaCqs#cqEvent}). */
    public boolean cqEvent(int cqn, int tid) {
        return cqs.cqEvent(cqn, tid);
    }

    void foreignDoorbell(DpaProcess p, String what) {
        rtos.lock.lock();
        try {
            p.foreignDoorbells++;
        } finally {
            rtos.lock.unlock();
        }
        if (config.strictIsolation()) {
            fail(p, ProcessStatus.OUTBOX_ISOLATION, "outbox isolation: " + what);
        }
    }

    void unsupportedDoorbell(DpaProcess p) {
        rtos.lock.lock();
        try {
            p.unsupportedDoorbells++;
        } finally {
            rtos.lock.unlock();
        }
    }

    public long foreignDoorbells(int pid) {
        return process(pid).foreignDoorbells;
    }

    // ---- DPA_OUTBOX, DPA_WINDOW ----

    public int outboxCreate(int pid) {
        DpaProcess p = process(pid);
        int id = ids.incrementAndGet();
        Outbox o = new Outbox(id, p);
        outboxes.put(id, o);
        p.outboxes.put(id, o);
        return id;
    }

    public void outboxDestroy(int id) {
        Outbox o = outboxes.remove(id);
        if (o == null) {
            throw new IllegalArgumentException("DPA outbox " + id + " does not exist");
        }
        o.process().outboxes.remove(id);
    }

    Outbox outbox(int id) {
        return outboxes.get(id);
    }

    public int windowCreate(int pid, int pd) {
        DpaProcess p = process(pid);
        int id = ids.incrementAndGet();
        Window w = new Window(id, p, pd);
        windowObjs.put(id, w);
        p.windows.put(id, w);
        return id;
    }

    public void windowDestroy(int id) {
        Window w = windowObjs.remove(id);
        if (w == null) {
            throw new IllegalArgumentException("DPA window " + id + " does not exist");
        }
        w.process().windows.remove(id);
    }

    Window window(int id) {
        return windowObjs.get(id);
    }

    // ---- EUs, diagnostics, teardown ----

    public void defineGroup(int id, BitSet eus) {
        rtos.lock.lock();
        try {
            this.eus.defineGroup(id, eus);
        } finally {
            rtos.lock.unlock();
        }
    }

    /** Waits until no activation runs or waits for an EU; false after the configured wall time. */
    public boolean awaitIdle() {
        return scheduler.awaitIdle(config.wallTimeout());
    }

    /** What {@code dpa:eus}, {@code dpa:ps} and {@code dpa:threads} show: one line per EU in use, process and thread. */
    public List<String> describe() {
        return DpaViews.ps(this);
    }

    /** {@code dpa:eus}: one line per EU, as {@code dpaeumgmt} lists them ({@link DpaViews#eus}). */
    public List<String> describeEus() {
        return DpaViews.eus(this);
    }

    /** {@code dpa:mm}: the memory model's findings per process, each with its handler line ({@link DpaViews#findings}). */
    public List<String> describeFindings() {
        return DpaViews.findings(this);
    }

    /** {@code dpa:crash}: each ended process's status, failing thread and its last handler line ({@link DpaViews#crashes}). */
    public List<String> describeCrashes() {
        return DpaViews.crashes(this);
    }

    Map<Integer, DpaProcess> processes() {
        return processes;
    }

    Map<Integer, DpaThread> threads() {
        return threads;
    }

    /** The processes alive now, for {@link DpaUnitView}; the caller holds the RTOS lock (their threads are read with them). */
    List<DpaProcess> processList() {
        assert rtos.lock.isHeldByCurrentThread();
        return List.copyOf(processes.values());
    }

    public List<Finding> findings() {
        return mm.findings();
    }

    /** What is still alive: activations, processes, DPA memory, DPA_MEM objects (empty after a clean teardown). */
    public List<String> leaks() {
        List<String> l = new ArrayList<>();
        if (scheduler.live() > 0) {
            l.add(scheduler.live() + " DPA activation(s) still live");
        }
        processes.keySet().forEach(p -> l.add("DPA process " + p + " not destroyed"));
        mems.keySet().forEach(m -> l.add("DPA_MEM " + m + " not destroyed"));
        if (memory.allocated() > 0) {
            l.add(memory.allocated() + " bytes of DPA memory allocated");
        }
        rtos.lock.lock();
        try {
            if (eus.busyCount() > 0) {
                l.add(eus.busyCount() + " EU(s) busy");
            }
        } finally {
            rtos.lock.unlock();
        }
        return l;
    }

    /** Function removal: every process is stopped (EUs first), then all objects and memory go. */
    @Override
    public void close() {
        if (wallWatchdog != null) {
            wallWatchdog.close();
        }
        for (int pid : List.copyOf(processes.keySet())) {
            processDestroy(pid);
        }
        for (int m : List.copyOf(mems.keySet())) {
            memDestroy(m);
        }
        memory.close();
    }
}
