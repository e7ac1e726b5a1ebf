package org.peerdirect.doca.dpa;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevKernel;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.flexio.FlexioEventHandler;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.flexio.FlexioStatus;

/**
 * The kernel launch dispatcher of one started {@link DocaDpa} ({@code doca_dpa_kernel_launch_*}).
 *
 * <p>A launch runs on the DPA's data path: doca-dpa-dev's kernel runtime ({@code DocaDpaDevKernel},
 * linked by dpacc) keeps pool slots, each a control block in the heap with its rank blocks and rank
 * threads (made by firmware command only when no free slot has enough ranks; reused after; gone
 * with the process at stop). To start a launch the dispatcher writes the slot's launch words
 * (kernel trampoline, argument, thread count) by the copy path and calls the runtime's start RPC
 * (one WRITE-with-immediate), whose handler on the DPA activates the ranks; each rank calls the
 * kernel by symbol ({@code Dpa.call} of its launch trampoline), counts itself ended with a DPA
 * atomic, and the last rank sets or adds the completion event through the event's DPA handle
 * (written into the slot with the launch: a DPA counter's address, or a host counter's window
 * descriptor, {@code DocaSyncEvent.kernelCompletionDpaHandle}) after advancing the slot's finished
 * count. No firmware command per launch, and no host thread between the last rank and the event.
 *
 * <p>[model] Still on the host, and left (issue 43): this thread waits for the wait events (a poll
 * every {@link #POLL_NANOS}) and sees a launch end by reading its slot's finished count (a copy,
 * no command) to free the slot and count the launch finished; moving the wait to the DPA needs a
 * DPA dispatcher woken by the event's update. So the completion event never moves before the last
 * rank ended (the rank runtime's order), and a kernel never starts before its wait event passed.
 * Launches whose events pass at the same poll start in submission order. {@link LaunchStats}
 * counts a launch finished when this thread sees it, which may be after its completion event
 * moved: {@link #refresh} waits for that poll.
 *
 * <p>Lock rules: {@link #lock} guards {@link #launches}, {@link #stop}, {@link #failure} and the
 * refresh counts; the thread never holds it while calling FlexIO (whose process lock a user's call may hold) or a sync
 * event. A launch and the slots are touched only by the dispatcher thread once submitted.
 */
final class KernelDispatcher {

    /** One {@code doca_dpa_kernel_launch_update_*}; {@code compHandle} is the completion event's DPA handle (0: none). */
    record Launch(String call, DocaSyncEvent waitEvent, long waitThreshold, DocaSyncEvent compEvent, long compHandle, long compCount, boolean add,
            int nthreads, FlexioFunc kernel, long arg) {

        /**
         * A launch of {@code doca_dpa_kernel_launch_update_*} {@code w} after its argument checks:
         * INVALID_VALUE for nthreads &lt; 1 or above {@code max} (read only then: the device's
         * capability), a function that is not a {@code __dpa_global__} kernel, arguments its pack
         * function refuses; then the completion event's DPA handle for {@code dpa}
         * ({@code DocaSyncEvent.kernelCompletionDpaHandle}: INVALID_VALUE for an event of another
         * DPA context or process, BAD_STATE for one not started), made once per event.
         */
        static Launch checked(String w, DocaSyncEvent waitEvent, long waitThreshold, DocaSyncEvent compEvent, long compCount,
                boolean add, int nthreads, java.util.function.IntSupplier max, FlexioFunc kernel, Object[] args, DocaDpa dpa) {
            DocaException.check(nthreads >= 1, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": nthreads " + nthreads);
            int m = max.getAsInt();
            DocaException.check(nthreads <= m, DocaError.DOCA_ERROR_INVALID_VALUE,
                    w + ": nthreads " + nthreads + " is more than the " + m + " threads a kernel may have (doca_dpa_get_max_threads_per_kernel)");
            DocaException.check(kernel != null && kernel.kind() == FlexioFunc.Kind.GLOBAL, DocaError.DOCA_ERROR_INVALID_VALUE,
                    w + ": " + (kernel == null ? "null kernel" : kernel.name() + " is not a __dpa_global__ kernel"));
            long arg;
            try {
                byte[] b = kernel.packArgs(args);
                arg = b.length == 0 ? 0 : ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong();
            } catch (IllegalArgumentException | IllegalStateException e) {
                throw new DocaException(DocaError.DOCA_ERROR_INVALID_VALUE, w + ": arguments of " + kernel.name() + ": " + e.getMessage(), e);
            }
            long comp = compEvent == null ? 0 : compEvent.kernelCompletionDpaHandle(dpa);
            return new Launch(w, waitEvent, waitThreshold, compEvent, comp, compCount, add, nthreads, kernel, arg);
        }
    }

    /**
     * A pool slot of doca-dpa-dev's kernel runtime: a control block, {@code capacity} rank blocks and
     * rank threads, and the slot's finished count as last read (its launches run one at a time).
     */
    private static final class Slot {
        final long ctl;
        final long blocks;
        final int capacity;
        final List<FlexioEventHandler> ranks = new ArrayList<>();
        long finished;

        Slot(long ctl, long blocks, int capacity) {
            this.ctl = ctl;
            this.blocks = blocks;
            this.capacity = capacity;
        }
    }

    /** A launch once started, on its slot. */
    private record Running(Launch launch, Slot slot) {
    }

    /** Back-off between polls while launches are pending: a poll's pace, not a synchronisation. */
    private static final long POLL_NANOS = TimeUnit.MICROSECONDS.toNanos(200);
    /** How often pending launches query the process's status (a firmware command). */
    static final long STATUS_EVERY_NANOS = TimeUnit.MILLISECONDS.toNanos(2);
    /** The dispatcher thread's next status query (its alone). */
    private long nextStatus = System.nanoTime() + STATUS_EVERY_NANOS;
    /** Status queries made, for the tests' command count. */
    final java.util.concurrent.atomic.AtomicLong statusQueries = new java.util.concurrent.atomic.AtomicLong();

    private final DocaDpa dpa;
    private final FlexioProcess process;
    private final DocaDpa.WaitComparison comparison;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition submitted = lock.newCondition();
    /** Submitted and not started (guarded by {@link #lock}). */
    private final List<Launch> launches = new ArrayList<>();
    /** Started and not ended (the dispatcher thread's alone). */
    private final List<Running> running = new ArrayList<>();
    /** Pool slots not running a launch (the dispatcher thread's alone). */
    private final List<Slot> free = new ArrayList<>();
    /** Submitted and not ended. */
    private final java.util.concurrent.atomic.AtomicInteger inFlight = new java.util.concurrent.atomic.AtomicInteger();
    private boolean stop;
    private DocaException failure;
    /** Polls asked by {@link #refresh} and the last one served (guarded by {@link #lock}); {@link #polled} signals a served one. */
    private long refreshAsked;
    private long refreshDone;
    private final Condition polled = lock.newCondition();
    private final Thread thread;

    KernelDispatcher(DocaDpa dpa, FlexioProcess process, DocaDpa.WaitComparison comparison) {
        this.dpa = dpa;
        this.process = process;
        this.comparison = comparison;
        this.thread = Thread.ofPlatform().daemon().name("doca-dpa-dispatcher-" + process.id()).start(this::loop);
    }

    void submit(Launch l) {
        lock.lock();
        try {
            DocaException.check(failure == null, DocaError.DOCA_ERROR_BAD_STATE,
                    l.call() + ": an earlier launch failed (" + (failure == null ? "" : failure.getMessage()) + ")");
            dpa.launchStats.launched(l); // before the dispatcher can see it: never finished before launched
            launches.add(l);
            inFlight.incrementAndGet();
            submitted.signalAll();
        } finally {
            lock.unlock();
        }
    }

    int pending() {
        return inFlight.get();
    }

    /** How long {@link #refresh} waits for the dispatcher's next poll at most. */
    private static final long REFRESH_NANOS = TimeUnit.SECONDS.toNanos(5);

    /**
     * Waits until the dispatcher thread completed a poll begun after this call (bounded by
     * {@link #REFRESH_NANOS}; at once when it ended). The last rank advances its slot's finished
     * count before it moves the completion event, so a caller that saw the event and refreshes
     * then finds the launch counted finished ({@link #pending}, {@link LaunchStats}). Call without
     * the DPA context's lock (the poll may take it, making a completion event's handle).
     */
    void refresh() {
        lock.lock();
        try {
            long want = ++refreshAsked;
            submitted.signalAll();
            long left = REFRESH_NANOS;
            while (refreshDone < want && !stop && failure == null && thread.isAlive() && left > 0) {
                left = polled.awaitNanos(left);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            lock.unlock();
        }
    }

    DocaException failure() {
        lock.lock();
        try {
            return failure;
        } finally {
            lock.unlock();
        }
    }

    /** Ends the thread and waits for it; launches not ended are dropped (their threads go with the process). */
    void shutdown() {
        lock.lock();
        try {
            stop = true;
            submitted.signalAll();
            polled.signalAll();
        } finally {
            lock.unlock();
        }
        try {
            thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void loop() {
        while (true) {
            List<Launch> waiting;
            long asked;
            lock.lock();
            try {
                while (!stop && failure == null && launches.isEmpty() && running.isEmpty() && refreshAsked == refreshDone) {
                    submitted.awaitUninterruptibly();
                }
                if (stop || failure != null) {
                    polled.signalAll();
                    return;
                }
                waiting = new ArrayList<>(launches);
                asked = refreshAsked;
            } finally {
                lock.unlock();
            }
            try {
                startPassed(waiting);
                endFinished();
                checkProcess();
            } catch (RuntimeException e) {
                fail(e);
                return;
            }
            lock.lock();
            try {
                refreshDone = asked;
                polled.signalAll();
            } finally {
                lock.unlock();
            }
            LockSupport.parkNanos(POLL_NANOS);
        }
    }

    /**
     * While launches are pending, the process's status (a firmware command) every
     * {@link #STATUS_EVERY_NANOS}, not per poll: a process that ended fails the pending launches
     * instead of leaving them waiting, and a launch quicker than that costs no command.
     */
    private void checkProcess() {
        long now = System.nanoTime();
        if (inFlight.get() == 0) {
            nextStatus = now + STATUS_EVERY_NANOS;
            return;
        }
        if (now - nextStatus < 0) {
            return;
        }
        nextStatus = now + STATUS_EVERY_NANOS;
        statusQueries.incrementAndGet();
        int status = process.processStatus();
        if (status != 0) {
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, String.format("the DPA process ended with status 0x%x"
                    + " (flexio_err_status %d) while %d launch(es) were pending", status, FlexioStatus.errStatusOf(status), inFlight.get()));
        }
    }

    private void startPassed(List<Launch> waiting) {
        for (Launch l : waiting) {
            if (l.waitEvent() != null && !comparison.passes(l.waitEvent().get(), l.waitThreshold())) {
                continue;
            }
            lock.lock();
            try {
                launches.remove(l);
            } finally {
                lock.unlock();
            }
            running.add(start(l));
            dpa.launchStats.started();
        }
    }

    /** The launch's words into a free slot with enough ranks (a new one if none), then the runtime's start RPC. */
    private Running start(Launch l) {
        int kernel = process.symbolIndex(l.kernel().name() + DocaDpaDevKernel.LAUNCH_SUFFIX);
        DocaException.check(kernel >= 0 && process.hasSymbol(DocaDpaDevKernel.START_SYMBOL), DocaError.DOCA_ERROR_DRIVER, l.call()
                + ": app " + process.app().name() + "'s image lacks doca-dpa-dev's kernel runtime (" + l.kernel().name()
                + DocaDpaDevKernel.LAUNCH_SUFFIX + "): link doca-dpa-dev into the image (dpacc does)");
        Slot s = take(l);
        ByteBuffer w = ByteBuffer.allocate(DocaDpaDevKernel.C_FINISHED).order(ByteOrder.LITTLE_ENDIAN);
        w.putLong(DocaDpaDevKernel.C_KERNEL, kernel).putLong(DocaDpaDevKernel.C_ARG, l.arg()).putLong(DocaDpaDevKernel.C_NTHREADS, l.nthreads())
                .putLong(DocaDpaDevKernel.C_COMP, l.compHandle()).putLong(DocaDpaDevKernel.C_COMP_VALUE, l.compCount())
                .putLong(DocaDpaDevKernel.C_COMP_ADD, l.add() ? 1 : 0);
        try {
            process.host2devMemcpy(w.array(), s.ctl);
            process.callRuntime(DocaDpaDevKernel.START_SYMBOL, s.ctl);
        } catch (RuntimeException e) {
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, l.call() + " of " + l.kernel().name() + " with " + l.nthreads()
                    + " threads: " + e.getMessage(), e);
        }
        return new Running(l, s);
    }

    /**
     * The smallest free slot with at least the launch's ranks, or a new one of exactly that many.
     * Running slots are looked at first when none is free: a launch whose completion event was
     * seen has its finished count moved already (the rank runtime's order), so a host launching
     * again on that event reuses the slot rather than making rank threads.
     */
    private Slot take(Launch l) {
        Slot best = fits(l);
        if (best == null) {
            endFinished();
            best = fits(l);
        }
        if (best != null) {
            free.remove(best);
            return best;
        }
        return newSlot(l);
    }

    private Slot fits(Launch l) {
        Slot best = null;
        for (Slot s : free) {
            if (s.capacity >= l.nthreads() && (best == null || s.capacity < best.capacity)) {
                best = s;
            }
        }
        return best;
    }

    /**
     * A new slot: control block and rank blocks (rank, log stream; the start RPC writes the count)
     * in the heap, one runtime rank thread per rank, run. Firmware commands, once per slot.
     */
    private Slot newSlot(Launch l) {
        int n = l.nthreads();
        long ctl = process.bufDevAlloc(DocaDpaDevKernel.controlSize(n));
        long blocks = ctl == 0 ? 0 : process.bufDevAlloc((long) n * DocaDpaDev.RANK_BLOCK_SIZE);
        if (blocks == 0) {
            if (ctl != 0) {
                process.bufDevFree(ctl);
            }
            throw new DocaException(DocaError.DOCA_ERROR_NO_MEMORY, l.call() + ": no DPA heap for " + n + " ranks' blocks");
        }
        Slot s = new Slot(ctl, blocks, n);
        try {
            ByteBuffer b = ByteBuffer.allocate(n * DocaDpaDev.RANK_BLOCK_SIZE).order(ByteOrder.LITTLE_ENDIAN);
            for (int rank = 0; rank < n; rank++) {
                b.putInt(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_RANK, rank);
                b.putLong(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_LOG_STREAM, dpa.logStream());
                b.putLong(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_TRACE, dpa.traceArea());
                b.putInt(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_WINDOW, dpa.windowId());
            }
            process.host2devMemcpy(b.array(), blocks);
            ByteBuffer c = ByteBuffer.allocate(DocaDpaDevKernel.controlSize(n)).order(ByteOrder.LITTLE_ENDIAN);
            c.putLong(DocaDpaDevKernel.C_RANK_BLOCKS, blocks);
            for (int rank = 0; rank < n; rank++) {
                FlexioEventHandler h = FlexioEventHandler.createRuntime(process, DocaDpaDevKernel.RANK_SYMBOL, ctl,
                        blocks + (long) rank * DocaDpaDev.RANK_BLOCK_SIZE);
                s.ranks.add(h);
                h.run();
                c.putLong(DocaDpaDevKernel.C_THREADS + 8 * rank, h.id());
            }
            process.host2devMemcpy(c.array(), ctl);
        } catch (RuntimeException e) { // nothing ran yet: the slot leaves nothing behind
            s.ranks.forEach(FlexioEventHandler::destroy);
            process.bufDevFree(blocks);
            process.bufDevFree(ctl);
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, l.call() + ": " + n + " rank threads of the kernel runtime: "
                    + e.getMessage(), e);
        }
        return s;
    }

    /** Launches whose slot's finished count moved (every rank ended, the last one moved the completion event): the slot is free again. */
    private void endFinished() {
        for (int i = 0; i < running.size(); i++) {
            Running r = running.get(i);
            long finished = ByteBuffer.wrap(process.dev2hostMemcpy(r.slot().ctl + DocaDpaDevKernel.C_FINISHED, 8))
                    .order(ByteOrder.LITTLE_ENDIAN).getLong();
            if (finished == r.slot().finished) {
                continue;
            }
            running.remove(i--);
            r.slot().finished = finished;
            free.add(r.slot());
            dpa.launchStats.finished(r.launch());
            inFlight.decrementAndGet();
        }
    }

    private void fail(RuntimeException e) {
        lock.lock();
        try {
            failure = e instanceof DocaException d ? d : new DocaException(DocaError.DOCA_ERROR_DRIVER, "kernel dispatcher: " + e.getMessage(), e);
            polled.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
