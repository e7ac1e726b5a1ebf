package org.peerdirect.doca.dpa;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.dev.DocaDpaDevKernel;
import org.peerdirect.doca.dpa.dev.DocaDpaDevKernelQueue;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.doca.syncevent.HostUpdateHook;
import org.peerdirect.flexio.FlexioEventHandler;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.flexio.FlexioStatus;

/**
 * The kernel launch dispatcher of one started {@link DocaDpa} ({@code doca_dpa_kernel_launch_*}),
 * host half. A launch runs on the DPA's data path: the user's call writes it into a pool slot of
 * doca-dpa-dev's kernel runtime ({@link KernelSlots}: launch words, wait words, one copy), queues
 * it in the queue block in DPA memory (ring entry and tail, two copies) and calls the runtime's
 * kick RPC once (a launch without a wait event while nothing else is in flight: the runtime's
 * start RPC instead, no queue); the dispatcher thread on the DPA ({@code DocaDpaDevKernelQueue}, made with the
 * queue at the first launch) starts, in submission order, every queued launch whose wait event
 * passed ({@link DocaDpa.WaitComparison}) and watches the events of the others. It is woken by the
 * event's update, never by a timer: a DPA update of a watched event activates it (the ISA's
 * activation, {@code DocaDpaDevSyncEvent}); a host update ({@code DocaSyncEvent.updateSet/Add})
 * runs this dispatcher's hook, one kick RPC. Each rank calls the kernel, the last one advances the
 * slot's finished count and moves the completion event. No firmware command per launch, no host
 * thread between a wait event's update and the kernel's start, nor between its last rank and its
 * completion event.
 *
 * <p>Still on the host: the watchdog thread ({@link #watch}), awake only while launches are in
 * flight: the process's status every {@link #STATUS_EVERY_NANOS} (a crashed process fails the
 * launches in flight, never a hang), the slots' finished counts (to free slots and count launches
 * finished; also read when a launch needs a slot and at {@link #refresh}), and [model] the slow
 * look for a launch whose event nothing on this DPA sees updated (a remote publisher's, or one
 * this DPA cannot reach): it opens the launch's gate once the event passed, every
 * {@link #LOOK_NANOS}.
 *
 * <p>Lock rules: {@link #lock} guards the slots, the queue's host words, the hooks,
 * {@code stop} and {@code failure}; FlexIO is called under it (copies, the kick RPC, the status:
 * FlexIO never calls back), a sync event's value never (a DPA counter's read takes the DPA
 * context's lock, which a user's launch holds while it takes this one).
 */
final class KernelDispatcher {

    /**
     * One {@code doca_dpa_kernel_launch_update_*}; {@code compHandle} is the completion event's DPA
     * handle (0: none), {@code waitHandle} the wait event's (0: none, or {@code gated}: the host's
     * look lets it go).
     */
    record Launch(String call, DocaSyncEvent waitEvent, long waitThreshold, long waitHandle, boolean gated, DocaSyncEvent compEvent,
            long compHandle, long compCount, boolean add, int nthreads, FlexioFunc kernel, long arg) {

        /**
         * A launch of {@code doca_dpa_kernel_launch_update_*} {@code w} after its argument checks:
         * INVALID_VALUE for nthreads &lt; 1 or above {@code max} (read only then: the device's
         * capability), a function that is not a {@code __dpa_global__} kernel, arguments its pack
         * function refuses; then the completion event's DPA handle for {@code dpa}
         * ({@code DocaSyncEvent.kernelCompletionDpaHandle}: INVALID_VALUE for an event of another
         * DPA context or process, BAD_STATE for one not started), made once per event; then the
         * wait event's ({@link #waitHandle}).
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
            DocaException.check(waitEvent == null || waitEvent.isStarted(), DocaError.DOCA_ERROR_BAD_STATE,
                    w + ": the wait event (doca_sync_event " + (waitEvent == null ? 0 : waitEvent.id()) + ") is not started");
            long wait = waitHandle(waitEvent, dpa);
            return new Launch(w, waitEvent, waitThreshold, wait, waitEvent != null && wait == 0, compEvent, comp, compCount, add, nthreads,
                    kernel, arg);
        }

        /**
         * The DPA handle the dispatcher on the DPA reads the wait event by (a DPA counter, or a host
         * counter of this process through the window), or 0: none, or an event the DPA cannot
         * watch — a remote publisher's (a peer's RDMA moves it: nothing on this DPA sees the
         * update) or one this DPA cannot reach (another context's or process's; a started one:
         * {@link #checked} refused the others) — which the host's look gates instead [model].
         */
        private static long waitHandle(DocaSyncEvent e, DocaDpa dpa) {
            if (e == null || e.publisherLocation() == DocaSyncEvent.Location.REMOTE_NET) {
                return 0;
            }
            try {
                return e.kernelCompletionDpaHandle(dpa);
            } catch (DocaException unreachable) {
                return 0;
            }
        }
    }

    /** How often the watchdog queries the process's status (a firmware command) while launches are in flight. */
    static final long STATUS_EVERY_NANOS = TimeUnit.MILLISECONDS.toNanos(2);
    /** How often the host looks at the events of gated launches (see {@link Launch#waitHandle}): a look's pace, not a synchronisation. */
    static final long LOOK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /** The watchdog's next status query (its alone). */
    private long nextStatus = System.nanoTime() + STATUS_EVERY_NANOS;
    /** Status queries made, for the tests' command count. */
    final AtomicLong statusQueries = new AtomicLong();
    /** RPCs made to the DPA's dispatcher ({@value DocaDpaDevKernelQueue#KICK_SYMBOL}), for the tests' count. */
    final AtomicLong kicks = new AtomicLong();

    private final DocaDpa dpa;
    private final FlexioProcess process;
    private final DocaDpa.WaitComparison comparison;
    private final ReentrantLock lock = new ReentrantLock();
    /** Signalled when a submission is the first in flight or gated, on failure and stop: the watchdog's. */
    private final Condition wake = lock.newCondition();
    private final KernelSlots slots;
    /** The queue block and the dispatcher thread on the DPA (made at the first launch; guarded by {@link #lock}). */
    private long queue;
    private FlexioEventHandler dispatcherThread;
    /** The next queue position (the host's tail) and the dispatcher's head as last read (guarded by {@link #lock}). */
    private long tail;
    private long headSeen;
    /** Launches started by the start RPC, not queued (nothing else in flight, no wait; guarded by {@link #lock}). */
    private long directStarts;
    /** Events with a host-update hook: the number of in-flight launches waiting on each (guarded by {@link #lock}). */
    private final Map<DocaSyncEvent, Integer> hooked = new HashMap<>();
    private final HostUpdateHook hostUpdateHook = new HostUpdateHook() {
        @Override
        public void updated(DocaSyncEvent event) {
            hostUpdated();
        }

        @Override
        public void releasing(DocaSyncEvent event) {
            waitEventReleasing(event);
        }
    };
    /** Submitted and not seen ended. */
    private final AtomicInteger inFlight = new AtomicInteger();
    private boolean stop;
    private DocaException failure;
    private final Thread watchdog;

    KernelDispatcher(DocaDpa dpa, FlexioProcess process, DocaDpa.WaitComparison comparison) {
        this.dpa = dpa;
        this.process = process;
        this.comparison = comparison;
        this.slots = new KernelSlots(dpa, process, lock);
        this.watchdog = Thread.ofPlatform().daemon().name("doca-dpa-dispatcher-" + process.id()).start(this::watch);
    }

    /**
     * Queues {@code l} for the DPA's dispatcher: a pool slot with its launch words (one copy), its
     * ring entry and the tail, a hook on its wait event (before the kick: a host update after the
     * dispatcher's look kicks again), then one RPC. FULL when the queue's ring has no room, DRIVER
     * when the image lacks the kernel runtime, NO_MEMORY (or DRIVER) when the queue or a slot
     * cannot be made: the call fails, nothing taken, the context unharmed. A failure once the
     * launch may be visible to the DPA (a copy, the RPC: the process gone) fails the dispatcher,
     * as a launch failing on the DPA does: {@link #failure}, and later launches are BAD_STATE.
     */
    void submit(Launch l) {
        lock.lock();
        try {
            DocaException.check(failure == null, DocaError.DOCA_ERROR_BAD_STATE,
                    l.call() + ": an earlier launch failed (" + (failure == null ? "" : failure.getMessage()) + ")");
            DocaException.check(!stop, DocaError.DOCA_ERROR_BAD_STATE, l.call() + ": the DPA context is stopping");
            checkRoom(l);
            // what can fail before anything reaches the DPA fails the call, nothing taken, the
            // context unharmed: no kernel runtime in the image, no heap for the queue or a slot
            int kernel = runtimeSymbol(l);
            if (queue == 0) {
                makeQueue(l);
            }
            KernelSlots.Slot slot = slots.take(l, this::ended);
            dpa.launchStats.launched(l); // before the DPA can start it: never finished before launched
            boolean first = inFlight.incrementAndGet() == 1;
            try {
                enqueue(l, slot, kernel);
            } catch (RuntimeException e) { // the launch may be visible to the DPA: the context fails
                fail(e);
            }
            if (first || l.gated()) { // the watchdog's pace starts (a later launch would only wake it early); a gate wants looks
                wake.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    /** The kernel's launch trampoline in the image; DRIVER naming it when the image lacks doca-dpa-dev's kernel runtime. */
    private int runtimeSymbol(Launch l) {
        int kernel = process.symbolIndex(l.kernel().name() + DocaDpaDevKernel.LAUNCH_SUFFIX);
        DocaException.check(kernel >= 0 && process.hasSymbol(DocaDpaDevKernel.START_SYMBOL)
                && process.hasSymbol(DocaDpaDevKernelQueue.DISPATCH_SYMBOL), DocaError.DOCA_ERROR_DRIVER, l.call()
                + ": app " + process.app().name() + "'s image lacks doca-dpa-dev's kernel runtime (" + l.kernel().name()
                + DocaDpaDevKernel.LAUNCH_SUFFIX + "): link doca-dpa-dev into the image (dpacc does)");
        return kernel;
    }

    /** The launch's words into its slot, then its start RPC or its ring entry, the tail and a kick. */
    private void enqueue(Launch l, KernelSlots.Slot s, int kernel) {
        // Nothing else in flight (every earlier launch seen finished, so none is queued on the DPA)
        // and no wait: the start RPC starts it at once, as the dispatcher would (no order to keep).
        boolean direct = l.waitEvent() == null && inFlight.get() == 1;
        long pos = direct ? -1 : tail;
        ByteBuffer w = ByteBuffer.allocate(DocaDpaDevKernel.LAUNCH_WORDS).order(ByteOrder.LITTLE_ENDIAN);
        w.putLong(DocaDpaDevKernel.C_KERNEL, kernel).putLong(DocaDpaDevKernel.C_ARG, l.arg()).putLong(DocaDpaDevKernel.C_NTHREADS, l.nthreads())
                .putLong(DocaDpaDevKernel.C_COMP, l.compHandle()).putLong(DocaDpaDevKernel.C_COMP_VALUE, l.compCount())
                .putLong(DocaDpaDevKernel.C_COMP_ADD, l.add() ? 1 : 0).putLong(DocaDpaDevKernel.C_WAIT, l.waitHandle())
                .putLong(DocaDpaDevKernel.C_WAIT_THRESHOLD, l.waitThreshold())
                .putLong(DocaDpaDevKernel.C_WAIT_GE, comparison == DocaDpa.WaitComparison.GE ? 1 : 0)
                .putLong(DocaDpaDevKernel.C_GATE, l.gated() ? 1 : 0).putLong(DocaDpaDevKernel.C_QUEUED, pos + 1);
        if (l.waitHandle() != 0) {
            hook(l.waitEvent(), +1);
        }
        s.launch = l;
        s.gateOpen = !l.gated();
        try {
            process.host2devMemcpy(w.array(), s.ctl);
            if (direct) {
                directStarts++;
                process.callRuntime(DocaDpaDevKernel.START_SYMBOL, s.ctl);
                return;
            }
            process.host2devMemcpy(le(s.ctl), queue + DocaDpaDevKernelQueue.Q_RING + 8 * (pos % DocaDpaDevKernelQueue.CAPACITY));
            process.host2devMemcpy(le(pos + 1), queue + DocaDpaDevKernelQueue.Q_TAIL);
            tail = pos + 1;
            kick();
        } catch (RuntimeException e) {
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, l.call() + " of " + l.kernel().name() + " with " + l.nthreads()
                    + " threads: " + e.getMessage(), e);
        }
    }

    /**
     * FULL (the launch not taken, nothing else changes) when the ring has no free position: the
     * oldest launch the DPA may still find queued is {@link DocaDpaDevKernelQueue#CAPACITY}
     * positions back (its head, read through the NIC only then).
     */
    private void checkRoom(Launch l) {
        if (queue == 0 || tail - headSeen < DocaDpaDevKernelQueue.CAPACITY) {
            return;
        }
        headSeen = slots.read(queue + DocaDpaDevKernelQueue.Q_HEAD);
        DocaException.check(tail - headSeen < DocaDpaDevKernelQueue.CAPACITY, DocaError.DOCA_ERROR_FULL, l.call() + ": the DPA's queue of "
                + DocaDpaDevKernelQueue.CAPACITY + " launches is full (head " + headSeen + ", tail " + tail
                + "): launches still waiting for their events, or not yet taken by the DPA's dispatcher; retry once some started");
    }

    /** The queue block (zeroed) and the dispatcher thread on the DPA, run: firmware commands, once per context. */
    private void makeQueue(Launch l) {
        long q = process.bufDevAlloc(DocaDpaDevKernelQueue.SIZE);
        DocaException.check(q != 0, DocaError.DOCA_ERROR_NO_MEMORY, l.call() + ": no DPA heap for the launch queue");
        FlexioEventHandler h = null;
        try {
            process.host2devMemcpy(new byte[DocaDpaDevKernelQueue.SIZE], q);
            h = FlexioEventHandler.createRuntime(process, DocaDpaDevKernelQueue.DISPATCH_SYMBOL, q, 0);
            process.host2devMemcpy(le(h.id()), q + DocaDpaDevKernelQueue.Q_THREAD);
            h.run();
            dispatcherThread = h;
        } catch (RuntimeException e) { // nothing queued yet: the queue leaves nothing behind
            if (h != null) {
                h.destroy();
            }
            process.bufDevFree(q);
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, l.call() + ": the kernel dispatcher thread: " + e.getMessage(), e);
        }
        queue = q;
    }

    private static byte[] le(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array();
    }

    /** One RPC activating the DPA's dispatcher (caller holds {@link #lock}: no kick after stop). */
    private void kick() {
        assert lock.isHeldByCurrentThread();
        kicks.incrementAndGet();
        process.callRuntime(DocaDpaDevKernelQueue.KICK_SYMBOL, queue);
    }

    /** A host-update hook on {@code e} counted up or down; registered while a launch in flight waits on it. */
    private void hook(DocaSyncEvent e, int delta) {
        assert lock.isHeldByCurrentThread();
        int n = hooked.getOrDefault(e, 0) + delta;
        if (n > 0) {
            if (hooked.put(e, n) == null) {
                e.addHostUpdateHook(hostUpdateHook);
            }
        } else if (hooked.remove(e) != null) {
            e.removeHostUpdateHook(hostUpdateHook);
        }
    }

    /**
     * A host update of an event a launch in flight waits on ({@code DocaSyncEvent}'s hook, on the
     * updating thread): one RPC wakes the DPA's dispatcher, which looks at the event itself. A
     * failing kick fails the dispatcher (the update itself happened).
     */
    private void hostUpdated() {
        lock.lock();
        try {
            if (!stop && failure == null && queue != 0) {
                kick();
            }
        } catch (RuntimeException e) {
            fail(e);
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code event} is stopped or destroyed (its counter about to go) while a launch in flight
     * waits on it: a launch the DPA has not started yet (its queued word, written back by the DPA
     * when it starts one, still set) would leave the DPA's dispatcher reading a freed counter. So
     * the dispatcher thread is destroyed (a firmware command that returns once it stopped) and the
     * dispatcher fails with BAD_STATE naming the event: those launches never run, later ones are
     * refused. Launches already started run to their end.
     */
    private void waitEventReleasing(DocaSyncEvent event) {
        lock.lock();
        try {
            if (stop || failure != null || !hooked.containsKey(event)) {
                return;
            }
            seen();
            int waiting = 0;
            Launch first = null;
            for (KernelSlots.Slot s : slots.busy()) {
                if (s.launch.waitEvent() == event && s.launch.waitHandle() != 0 && slots.read(s.ctl + DocaDpaDevKernel.C_QUEUED) != 0) {
                    waiting++;
                    first = first == null ? s.launch : first;
                }
            }
            if (waiting == 0) {
                return;
            }
            dispatcherThread.destroy();
            fail(new DocaException(DocaError.DOCA_ERROR_BAD_STATE, String.format("doca_sync_event %d went (stop or destroy) while %d"
                    + " launch(es) waited on it (%s): the DPA's dispatcher stopped; they never run, later launches are refused",
                    event.id(), waiting, LaunchStats.describe(first))));
            hooked.keySet().forEach(e -> e.removeHostUpdateHook(hostUpdateHook));
            hooked.clear();
        } catch (RuntimeException e) {
            fail(e);
        } finally {
            lock.unlock();
        }
    }

    /** A launch whose slot's finished count moved. */
    private void ended(Launch l) {
        if (l.waitHandle() != 0) {
            hook(l.waitEvent(), -1);
        }
        dpa.launchStats.finished(l);
        inFlight.decrementAndGet();
    }

    int pending() {
        return inFlight.get();
    }

    /**
     * Reads the slots' finished counts now (copies, no command): a launch whose completion event
     * the caller saw counts finished after this (the last rank advances the count before it moves
     * the event), for {@link #pending} and {@link LaunchStats}.
     */
    void refresh() {
        lock.lock();
        try {
            if (!stop && failure == null) {
                seen();
            }
        } catch (RuntimeException e) {
            fail(e);
        } finally {
            lock.unlock();
        }
    }

    private void seen() {
        slots.endFinished(this::ended);
        if (queue != 0) {
            dpa.launchStats.startedTotal(slots.read(queue + DocaDpaDevKernelQueue.Q_STARTS) + directStarts);
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

    /**
     * Ends the watchdog and waits for it; the hooks go; launches not ended are dropped (their
     * threads, the queue and the dispatcher thread go with the process).
     */
    void shutdown() {
        lock.lock();
        try {
            stop = true;
            hooked.keySet().forEach(e -> e.removeHostUpdateHook(hostUpdateHook));
            hooked.clear();
            wake.signalAll();
        } finally {
            lock.unlock();
        }
        try {
            watchdog.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The watchdog: asleep while nothing is in flight; else every {@link #STATUS_EVERY_NANOS} the
     * process's status (a process that ended fails the launches in flight instead of leaving them
     * waiting) and the slots' finished counts, and every {@link #LOOK_NANOS} while a gated launch
     * waits, a look at its event ({@link #look}). It starts nothing itself.
     */
    private void watch() {
        while (true) {
            List<KernelSlots.Slot> gated = new ArrayList<>();
            List<Launch> gatedLaunches = new ArrayList<>();
            lock.lock();
            try {
                while (!stop && failure == null && inFlight.get() == 0) {
                    wake.awaitUninterruptibly();
                }
                if (stop || failure != null) {
                    return;
                }
                for (KernelSlots.Slot s : slots.busy()) {
                    if (!s.gateOpen) {
                        gated.add(s);
                        gatedLaunches.add(s.launch);
                    }
                }
                wake.awaitNanos(gated.isEmpty() ? STATUS_EVERY_NANOS : LOOK_NANOS);
            } catch (InterruptedException e) {
                return;
            } finally {
                lock.unlock();
            }
            try {
                List<Boolean> passed = new ArrayList<>();
                for (Launch l : gatedLaunches) { // outside the lock: a DPA counter's value takes the DPA context's
                    long v;
                    try {
                        v = l.waitEvent().get();
                    } catch (DocaException e) { // stopped or destroyed under the gated launch
                        throw new DocaException(e.error(), LaunchStats.describe(l) + ": its wait event (doca_sync_event " + l.waitEvent().id()
                                + ") cannot be read: " + e.getMessage(), e);
                    }
                    passed.add(comparison.passes(v, l.waitThreshold()));
                }
                lock.lock();
                try {
                    if (stop || failure != null) {
                        return;
                    }
                    look(gated, gatedLaunches, passed);
                    seen();
                    checkProcess();
                } finally {
                    lock.unlock();
                }
            } catch (RuntimeException e) {
                fail(e);
                return;
            }
        }
    }

    /**
     * [model] The host's slow look, only for launches whose event nothing on this DPA sees
     * updated (a remote publisher's: a peer's RDMA moves it; or an event this DPA cannot reach):
     * a gate that passed opens (one copy) and one RPC lets the DPA's dispatcher start it in order.
     */
    private void look(List<KernelSlots.Slot> gated, List<Launch> launches, List<Boolean> passed) {
        boolean opened = false;
        for (int i = 0; i < gated.size(); i++) {
            KernelSlots.Slot s = gated.get(i);
            if (passed.get(i) && s.launch == launches.get(i) && !s.gateOpen) {
                process.host2devMemcpy(le(0), s.ctl + DocaDpaDevKernel.C_GATE);
                s.gateOpen = true;
                opened = true;
            }
        }
        if (opened) {
            kick();
        }
    }

    /** The process's status every {@link #STATUS_EVERY_NANOS} while launches are in flight (a quick launch costs no command). */
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
        int status = process.processStatus();
        statusQueries.incrementAndGet(); // after the command: a test's count of commands minus queries never sees one in flight counted

        if (status != 0) {
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, String.format("the DPA process ended with status 0x%x"
                    + " (flexio_err_status %d) while %d launch(es) were pending", status, FlexioStatus.errStatusOf(status), inFlight.get()));
        }
    }

    private void fail(RuntimeException e) {
        lock.lock();
        try {
            if (failure == null) {
                failure = e instanceof DocaException d ? d : new DocaException(DocaError.DOCA_ERROR_DRIVER, "kernel dispatcher: " + e.getMessage(), e);
            }
            wake.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
