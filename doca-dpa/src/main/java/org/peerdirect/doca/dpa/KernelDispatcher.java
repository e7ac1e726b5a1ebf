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
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.flexio.FlexioEventHandler;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.flexio.FlexioStatus;

/**
 * The kernel launch dispatcher of one started {@link DocaDpa} ({@code doca_dpa_kernel_launch_*}).
 *
 * <p>[model] DOCA's runtime keeps a launch descriptor ring and a dispatcher thread on the DPA
 * (DPA_MODEL.md §2.5). Here the dispatcher is still a host thread (the depth is wrong: issue 43,
 * left): {@code Dpa.call} reaches only {@code __dpa_rpc__} entries (a call of a
 * {@code __dpa_global__} ends the process 0x42, {@code FlexioRpcTriggerTest}), so DPA runtime code
 * cannot yet call a kernel and count its rank's end. What the move needs, in order: a dpacc launch
 * trampoline per kernel ({@code long <kernel>__launch(long arg)}, an RPC-kind symbol calling the
 * kernel, in images linking doca-dpa-dev); doca-dpa-dev runtime entries (a rank handler that
 * {@code Dpa.call}s the trampoline then counts itself ended with an atomic, the last rank updating
 * the completion event; a start RPC activating the pooled rank threads); a window to a host
 * counter for a completion event the CPU subscribes to, and doca-core's waiter polling such a
 * counter (a CPU-published event's waiter sleeps until a CPU update, which a DPA write is not).
 * As {@code FlexioCmdq} does, the dispatcher here is a host thread of the user's library: for each
 * launch, once its wait event passes its threshold, it writes each rank's block ({@link DocaDpaDev#RANK_BLOCK_SIZE} bytes: rank,
 * num_threads) into the DPA heap, creates one DPA thread per rank (entry: the kernel, argument:
 * the kernel's packed argument, thread-local storage: the rank block), runs and triggers them;
 * when every rank's activation ended (the thread's query), the threads go and the completion event
 * is set or increased. So the completion event never moves before the last rank ended, and a
 * kernel never starts before its event passed. Launches whose events pass at the same poll start
 * in submission order.
 *
 * <p>Lock rules: {@link #lock} guards {@link #launches}, {@link #stop} and {@link #failure}; the
 * thread never holds it while calling FlexIO (whose process lock a user's call may hold) or a sync
 * event. A launch is touched only by the dispatcher thread once submitted.
 */
final class KernelDispatcher {

    /** One {@code doca_dpa_kernel_launch_update_*}. */
    record Launch(String call, DocaSyncEvent waitEvent, long waitThreshold, DocaSyncEvent compEvent, long compCount, boolean add,
            int nthreads, FlexioFunc kernel, long arg) {

        /**
         * A launch of {@code doca_dpa_kernel_launch_update_*} {@code w} after its argument checks:
         * INVALID_VALUE for nthreads &lt; 1 or above {@code max} (read only then: the device's
         * capability), a function that is not a {@code __dpa_global__} kernel, arguments its pack
         * function refuses.
         */
        static Launch checked(String w, DocaSyncEvent waitEvent, long waitThreshold, DocaSyncEvent compEvent, long compCount,
                boolean add, int nthreads, java.util.function.IntSupplier max, FlexioFunc kernel, Object[] args) {
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
            return new Launch(w, waitEvent, waitThreshold, compEvent, compCount, add, nthreads, kernel, arg);
        }
    }

    /** A launch once started: its rank threads and their rank blocks. */
    private static final class Running {
        final Launch launch;
        final List<FlexioEventHandler> ranks = new ArrayList<>();
        long blocks;

        Running(Launch launch) {
            this.launch = launch;
        }
    }

    /** Back-off between polls while launches are pending: a poll's pace, not a synchronisation. */
    private static final long POLL_NANOS = TimeUnit.MICROSECONDS.toNanos(200);

    private final DocaDpa dpa;
    private final FlexioProcess process;
    private final DocaDpa.WaitComparison comparison;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition submitted = lock.newCondition();
    /** Submitted and not started (guarded by {@link #lock}). */
    private final List<Launch> launches = new ArrayList<>();
    /** Started and not ended (the dispatcher thread's alone). */
    private final List<Running> running = new ArrayList<>();
    /** Submitted and not ended. */
    private final java.util.concurrent.atomic.AtomicInteger inFlight = new java.util.concurrent.atomic.AtomicInteger();
    private boolean stop;
    private DocaException failure;
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
            lock.lock();
            try {
                while (!stop && failure == null && launches.isEmpty() && running.isEmpty()) {
                    submitted.awaitUninterruptibly();
                }
                if (stop || failure != null) {
                    return;
                }
                waiting = new ArrayList<>(launches);
            } finally {
                lock.unlock();
            }
            try {
                startPassed(waiting);
                endFinished();
                int status = process.processStatus();
                if (status != 0) {
                    throw new DocaException(DocaError.DOCA_ERROR_DRIVER, String.format("the DPA process ended with status 0x%x"
                            + " (flexio_err_status %d) while %d launch(es) were pending", status, FlexioStatus.errStatusOf(status), inFlight.get()));
                }
            } catch (RuntimeException e) {
                fail(e);
                return;
            }
            LockSupport.parkNanos(POLL_NANOS);
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

    /** The rank blocks in the heap, then one thread per rank, run and triggered. */
    private Running start(Launch l) {
        Running r = new Running(l);
        int size = l.nthreads() * DocaDpaDev.RANK_BLOCK_SIZE;
        r.blocks = process.bufDevAlloc(size);
        DocaException.check(r.blocks != 0, DocaError.DOCA_ERROR_NO_MEMORY, l.call() + ": no DPA heap for " + l.nthreads() + " rank blocks");
        ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
        for (int rank = 0; rank < l.nthreads(); rank++) {
            b.putInt(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_RANK, rank);
            b.putInt(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_NUM_THREADS, l.nthreads());
            b.putLong(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_LOG_STREAM, dpa.logStream());
        }
        try {
            process.host2devMemcpy(b.array(), r.blocks);
            for (int rank = 0; rank < l.nthreads(); rank++) {
                long tls = r.blocks + (long) rank * DocaDpaDev.RANK_BLOCK_SIZE;
                r.ranks.add(FlexioEventHandler.create(process, new FlexioEventHandler.Attr(l.kernel(), false, l.arg(), tls,
                        FlexioEventHandler.AffinityType.NONE, 0)));
            }
            for (FlexioEventHandler h : r.ranks) {
                h.run();
            }
        } catch (RuntimeException e) { // nothing ran yet: the launch leaves nothing behind
            r.ranks.forEach(FlexioEventHandler::destroy);
            process.bufDevFree(r.blocks);
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, l.call() + " of " + l.kernel().name() + " with " + l.nthreads()
                    + " threads: " + e.getMessage(), e);
        }
        for (FlexioEventHandler h : r.ranks) {
            h.trigger();
        }
        return r;
    }

    /** Launches whose every rank ended: threads and blocks go, then the completion event moves. */
    private void endFinished() {
        for (int i = 0; i < running.size(); i++) {
            Running r = running.get(i);
            boolean all = true;
            for (FlexioEventHandler h : r.ranks) {
                if (!h.activationEnded(0)) {
                    all = false;
                    break;
                }
            }
            if (!all) {
                continue;
            }
            running.remove(i--);
            for (FlexioEventHandler h : r.ranks) {
                h.destroy();
            }
            process.bufDevFree(r.blocks);
            // counted ended before the completion event moves: whoever sees the event sees the counts
            dpa.launchStats.finished(r.launch);
            inFlight.decrementAndGet();
            complete(r.launch);
        }
    }

    /**
     * Sets or adds the completion event. A counter in host memory takes the CPU's atomic add; one
     * in this context's DPA memory (a DPA subscriber, as Seed 001's chain has) is read and written
     * back through the runtime's copies: atomic against the other launches' completions (this one
     * thread makes them all), not against DPA code adding to the same event at the same moment
     * [model limit: the loopback QP does no RDMA atomics]. A DPA counter of another context fails
     * the launch (INVALID_VALUE from its handle).
     */
    private void complete(Launch l) {
        DocaSyncEvent ev = l.compEvent();
        if (ev == null) {
            return;
        }
        if (ev.subscriberLocation() == DocaSyncEvent.Location.DPA) {
            long h = ev.getDpaHandle(dpa);
            dpa.syncEventCounterSet(h, l.add() ? dpa.syncEventCounterGet(h) + l.compCount() : l.compCount());
        } else if (l.add()) {
            ev.updateAdd(l.compCount());
        } else {
            ev.updateSet(l.compCount());
        }
    }

    private void fail(RuntimeException e) {
        lock.lock();
        try {
            failure = e instanceof DocaException d ? d : new DocaException(DocaError.DOCA_ERROR_DRIVER, "kernel dispatcher: " + e.getMessage(), e);
        } finally {
            lock.unlock();
        }
    }
}
