package org.peerdirect.doca.syncevent;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.doca.DocaDpaContext;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;

/**
 * {@code struct doca_sync_event}: a 64-bit counter that the CPU, the DPA or a remote node updates,
 * reads and waits on ({@code doca_sync_event.h}). It has one publisher location and one subscriber
 * location, configured before {@link #start} (a second one is DOCA_ERROR_ALREADY_EXIST, the
 * closest status: DOCA lists none); the counter lives near the subscriber.
 *
 * <p>Where the counter is: with a CPU subscriber (or, without one, a CPU publisher), in a page of
 * the device's process, registered on the device (an MR: remote write and atomics only when the
 * publisher is a remote node), so a peer's RDMA reaches the same 8 bytes the CPU reads. The CPU
 * updates it with atomic instructions on that page ({@link VarHandle} on the pinned frame, what a
 * CPU does through its TLB). With a DPA subscriber the counter is 8 bytes of the DPA context's
 * memory ({@link DocaDpaContext#syncEventCounterAlloc}, DPA_MODEL.md §2.5): the DPA updates it with
 * its own atomics through the handle {@link #getDpaHandle} gives (its DPA address); the host reads
 * and sets it by copies through the DPA runtime, and a host {@link #updateAdd} is NOT_SUPPORTED
 * there (it could not be atomic with the DPA's adds). A DPA publisher of a CPU-subscribed counter
 * (NVIDIA's kernel-launch and initiator-target samples' completion events) reaches the host page
 * through the DPA context's window [model: DOCA does not say how]: {@link #getDpaHandle} gives a
 * descriptor in DPA memory naming the page's address and a key of the DPA process over it
 * ({@link DocaDpaContext#dpaHostSyncEventHandle}), made at the first call, freed at stop.
 *
 * <p>Threads: DOCA calls its Sync Event API thread-unsafe; configuration ({@code add_*}, start,
 * stop, destroy) is so here. The value operations ({@link #get}, {@link #updateSet},
 * {@link #updateAdd}, {@link #waitGt}) are single atomic memory operations on the counter
 * ({@code update_add} is documented atomic) and may run on many threads at once [model]. A wait returns when {@code (value & mask) > threshold} (unsigned), when its bound
 * expires (DOCA_ERROR_TIME_OUT, the bounded form is ours [model]), or when the event is stopped or
 * destroyed under it (DOCA_ERROR_BAD_STATE): never a hang past the event's life. With a CPU
 * publisher every change goes through this object, which wakes the waiters; with a remote
 * publisher the change comes by DMA and the waiter polls, as DOCA's {@code wait_gt} does.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/Sync+Event">DOCA Sync Event</a>
 */
public final class DocaSyncEvent {

    /** A publisher or subscriber location. */
    public enum Location {
        NONE, CPU, DPA, REMOTE_NET
    }

    private enum State {
        CONFIGURING, STARTED, STOPPED, DESTROYED
    }

    private static final VarHandle COUNTER = ValueLayout.JAVA_LONG.varHandle();
    private static final AtomicLong IDS = new AtomicLong();
    private static final long PAGE = 4096;

    private final long id = IDS.incrementAndGet();
    private volatile State state = State.CONFIGURING;
    private Location publisher = Location.NONE;
    private Location subscriber = Location.NONE;
    private DocaDev publisherDev;
    private DocaDev subscriberDev;
    private DocaDpaContext publisherDpa;
    private DocaDpaContext subscriberDpa;

    /** The device and process the counter lives in, its page, the MR and the CPU's view of the page (while started). */
    private DocaDev home;
    private long va;
    private IbvMr mr;
    private MemorySegment page;
    /** The counter's DPA address when the subscriber is a DPA (while started), else 0. */
    private long dpaCounter;
    /** The key remote nodes reach a DPA counter with (a remote publisher), else 0. */
    private int dpaKey;
    /** The DPA's window handle of a counter in host memory (made at the first {@link #hostDpaHandle}). */
    private final HostDpaHandle hostHandle = new HostDpaHandle();

    /** Told of host updates and of the counter's release while registered ({@link #addHostUpdateHook}). */
    private final HostUpdateHooks hostUpdateHooks = new HostUpdateHooks();

    /** The CPU's waiters: they sleep or poll there; updaters wake them. */
    private final SyncEventWaits waits = new SyncEventWaits();

    private DocaSyncEvent() {
    }

    /** {@code doca_sync_event_create}. */
    public static DocaSyncEvent create() {
        return new DocaSyncEvent();
    }

    // --------------------------------------------------------------------------------- configuration

    /** {@code doca_sync_event_add_publisher_location_cpu}: the host CPU of {@code dev}'s process publishes. */
    public void addPublisherLocationCpu(DocaDev dev) {
        checkDev("doca_sync_event_add_publisher_location_cpu", dev);
        setPublisher("doca_sync_event_add_publisher_location_cpu", Location.CPU);
        publisherDev = dev;
        dev.hold(this);
    }

    /** {@code doca_sync_event_add_publisher_location_dpa}: the DPA context {@code dpa} publishes (its kernels' completions, its device updates). */
    public void addPublisherLocationDpa(DocaDpaContext dpa) {
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_sync_event_add_publisher_location_dpa: null DPA");
        setPublisher("doca_sync_event_add_publisher_location_dpa", Location.DPA);
        publisherDpa = dpa;
        attached(dpa);
    }

    /** {@code doca_sync_event_add_publisher_location_remote_net}: a remote node publishes (over RDMA). */
    public void addPublisherLocationRemoteNet() {
        setPublisher("doca_sync_event_add_publisher_location_remote_net", Location.REMOTE_NET);
    }

    /** {@code doca_sync_event_add_subscriber_location_cpu}: the host CPU of {@code dev}'s process subscribes; the counter lives there. */
    public void addSubscriberLocationCpu(DocaDev dev) {
        checkDev("doca_sync_event_add_subscriber_location_cpu", dev);
        setSubscriber("doca_sync_event_add_subscriber_location_cpu", Location.CPU);
        subscriberDev = dev;
        dev.hold(this);
    }

    /** {@code doca_sync_event_add_subscriber_location_dpa}: the DPA context {@code dpa} subscribes; {@link #start} puts the counter in its DPA memory. */
    public void addSubscriberLocationDpa(DocaDpaContext dpa) {
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_sync_event_add_subscriber_location_dpa: null DPA");
        setSubscriber("doca_sync_event_add_subscriber_location_dpa", Location.DPA);
        subscriberDpa = dpa;
        if (publisherDpa != dpa) {
            attached(dpa);
        }
    }

    /** Tells {@code dpa} it is a location of this event, if it keeps such a list ({@link SyncEventAttachments}). */
    private void attached(DocaDpaContext dpa) {
        if (dpa instanceof SyncEventAttachments a) {
            a.syncEventAttached(this);
        }
    }

    private void checkDev(String what, DocaDev dev) {
        DocaException.check(dev != null, DocaError.DOCA_ERROR_INVALID_VALUE, what + ": null device");
        dev.checkOpen(what);
    }

    private void setPublisher(String what, Location l) {
        checkConfiguring(what);
        DocaException.check(publisher == Location.NONE, DocaError.DOCA_ERROR_ALREADY_EXIST,
                what + ": the event has a publisher location already (" + publisher + "); a sync event has one");
        publisher = l;
    }

    private void setSubscriber(String what, Location l) {
        checkConfiguring(what);
        DocaException.check(subscriber == Location.NONE, DocaError.DOCA_ERROR_ALREADY_EXIST,
                what + ": the event has a subscriber location already (" + subscriber + "); a sync event has one");
        subscriber = l;
    }

    private void checkConfiguring(String what) {
        State s = state;
        DocaException.check(s != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, what + ": the event was destroyed");
        DocaException.check(s == State.CONFIGURING, DocaError.DOCA_ERROR_BAD_STATE, what + ": the event was started; locations are set before start");
    }

    /** The event's number in this JVM (its {@code toString} starts with it; {@code dpa:doca} names events by it). */
    public long id() {
        return id;
    }

    /** Whether the event is started (its counter exists; {@code doca_sync_event_start} done, no stop or destroy since). */
    public boolean isStarted() {
        return state == State.STARTED;
    }

    /** The publisher location. */
    public Location publisherLocation() {
        return publisher;
    }

    /** The subscriber location. */
    public Location subscriberLocation() {
        return subscriber;
    }

    // ------------------------------------------------------------------------------------- life cycle

    /**
     * {@code doca_sync_event_start}: places the counter (zero) near the subscriber.
     *
     * @throws DocaException BAD_STATE (started before, or no CPU location to place the counter
     *         in and no subscriber), NOT_SUPPORTED (a DPA subscriber whose context has no DPA memory, or with a remote publisher),
     *         INVALID_VALUE (CPU locations of two processes), NO_MEMORY (the page or its registration)
     */
    public void start() {
        String w = "doca_sync_event_start";
        checkConfiguring(w);
        if (subscriber == Location.DPA) {
            startInDpaMemory(w);
            return;
        }
        home = subscriberDev != null ? subscriberDev : publisherDev;
        DocaException.check(home != null, DocaError.DOCA_ERROR_BAD_STATE,
                w + ": no CPU location (add_subscriber_location_cpu) to place the counter in; publisher " + publisher + ", subscriber " + subscriber);
        DocaException.check(publisherDev == null || subscriberDev == null || publisherDev.process() == subscriberDev.process(),
                DocaError.DOCA_ERROR_INVALID_VALUE, w + ": CPU publisher and subscriber in two processes (" + publisherDev + ", " + subscriberDev + ")");
        home.checkOpen(w);
        AddressSpace p = home.process();
        int access = IbAccess.LOCAL_WRITE | (publisher == Location.REMOTE_NET
                ? IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_ATOMIC : 0);
        try {
            va = p.mmap(PAGE);
            p.populate(va, PAGE, true);
            mr = home.rdmaBridgeGetDevPd().regMr(va, PAGE, access);
            page = p.pinnedPageView(va);
        } catch (KernelException e) {
            releaseCounter();
            throw DocaException.ofErrno(w + ": placing the counter in " + p, e);
        }
        COUNTER.setVolatile(page, 0L, 0L);
        state = State.STARTED;
    }

    /** The counter of a DPA subscriber: 8 bytes of its DPA memory; a CPU publisher must be of the DPA's process. */
    private void startInDpaMemory(String w) {
        DocaException.check(publisherDev == null || publisherDev.process() == subscriberDpa.dev().process(), DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": the CPU publisher (" + publisherDev + ") is not of the DPA context's process (" + subscriberDpa.dev() + ")");
        dpaCounter = subscriberDpa.syncEventCounterAlloc();
        if (publisher == Location.REMOTE_NET) { // a remote node's RDMA reaches the counter through a key of the DPA context
            try {
                dpaKey = subscriberDpa.dpaMkeyCreate(dpaCounter, 8);
            } catch (RuntimeException e) {
                releaseCounter();
                throw e;
            }
        }
        state = State.STARTED;
    }

    /**
     * {@code doca_sync_event_stop}: the counter goes (its registration and page); waiters return
     * BAD_STATE. BAD_STATE when not started.
     */
    public void stop() {
        State s = state;
        DocaException.check(s != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_sync_event_stop: the event was destroyed");
        DocaException.check(s == State.STARTED, DocaError.DOCA_ERROR_BAD_STATE, "doca_sync_event_stop: the event is not started");
        state = State.STOPPED;
        waits.wakeAll();
        hostUpdateHooks.releasing(this);
        releaseCounter();
    }

    /** {@code doca_sync_event_destroy}: stops a started event and releases its devices; a second destroy is INVALID_VALUE. */
    public void destroy() {
        State s = state;
        DocaException.check(s != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_sync_event_destroy: the event was destroyed already");
        state = State.DESTROYED;
        waits.wakeAll();
        try {
            if (s == State.STARTED) {
                hostUpdateHooks.releasing(this);
            }
            releaseCounter();
        } finally {
            if (publisherDev != null) {
                publisherDev.unhold(this);
            }
            if (subscriberDev != null) {
                subscriberDev.unhold(this);
            }
            if (publisherDpa instanceof SyncEventAttachments a) {
                a.syncEventDetached(this);
            }
            if (subscriberDpa != publisherDpa && subscriberDpa instanceof SyncEventAttachments a) {
                a.syncEventDetached(this);
            }
        }
    }

    /** Deregisters and unmaps the counter's page; waiters were woken first and see the state, not the page. */
    private void releaseCounter() {
        hostHandle.release();
        if (dpaKey != 0) {
            int k = dpaKey;
            dpaKey = 0;
            subscriberDpa.dpaMkeyDestroy(k);
        }
        if (dpaCounter != 0) {
            long d = dpaCounter;
            dpaCounter = 0;
            try {
                subscriberDpa.syncEventCounterFree(d);
            } catch (DocaException e) {
                if (e.error() != DocaError.DOCA_ERROR_BAD_STATE) { // BAD_STATE: the DPA stopped, its memory went with it
                    throw e;
                }
            }
            return;
        }
        page = null;
        try {
            if (mr != null) {
                mr.dereg();
            }
            if (va != 0 && !home.process().exited()) {
                home.process().munmap(va, PAGE);
            }
        } catch (KernelException e) {
            throw DocaException.ofErrno("doca_sync_event: releasing the counter", e);
        } finally {
            mr = null;
            va = 0;
        }
    }

    // ----------------------------------------------------------------------------------- value (CPU)

    /** {@code doca_sync_event_get}: the counter's value (a volatile 8-byte load). */
    public long get() {
        return value("doca_sync_event_get");
    }

    /** The counter's value: a volatile load of the host page, or a copy out of DPA memory. */
    private long value(String what) {
        MemorySegment pg = counter(what);
        return pg == DPA_MEMORY ? subscriberDpa.syncEventCounterGet(dpaCounter) : (long) COUNTER.getVolatile(pg, 0L);
    }

    /** {@code doca_sync_event_update_set}: stores {@code value} (an 8-byte volatile store) and wakes waiters. */
    public void updateSet(long value) {
        MemorySegment pg = counter("doca_sync_event_update_set");
        if (pg == DPA_MEMORY) {
            subscriberDpa.syncEventCounterSet(dpaCounter, value);
        } else {
            COUNTER.setVolatile(pg, 0L, value);
        }
        waits.wakeIfWaited();
        hostUpdateHooks.updated(this);
    }

    /** {@code doca_sync_event_update_add}: atomically adds {@code value}; returns the value before ({@code fetched}). */
    public long updateAdd(long value) {
        String w = "doca_sync_event_update_add";
        MemorySegment pg = counter(w);
        DocaException.check(pg != DPA_MEMORY, DocaError.DOCA_ERROR_NOT_SUPPORTED,
                w + ": the counter is in DPA memory (a DPA subscriber); a host add could not be atomic with the DPA's adds (update_set it)");
        long before = (long) COUNTER.getAndAdd(pg, 0L, value);
        waits.wakeIfWaited();
        hostUpdateHooks.updated(this);
        return before;
    }

    /**
     * Registers {@code hook} until removed ({@link HostUpdateHook}: after each host update, before
     * the counter goes at stop or destroy; an update by DMA or from the DPA tells no hook). A hook
     * must not call back into this event's configuration.
     */
    public void addHostUpdateHook(HostUpdateHook hook) {
        hostUpdateHooks.add(hook);
    }

    /** Removes a hook of {@link #addHostUpdateHook} (one registration); nothing when it is not registered. */
    public void removeHostUpdateHook(HostUpdateHook hook) {
        hostUpdateHooks.remove(hook);
    }

    /**
     * {@code doca_sync_event_wait_gt}: returns once {@code (value & mask) > threshold}, unsigned.
     * Unbounded as DOCA's; it ends with BAD_STATE if the event is stopped or destroyed meanwhile,
     * and with DOCA_ERROR_AGAIN (interrupt flag kept) if the thread is interrupted [model].
     */
    public void waitGt(long threshold, long mask) {
        await("doca_sync_event_wait_gt", threshold, mask, -1, false);
    }

    /** {@code doca_sync_event_wait_gt_yield}: {@link #waitGt}, yielding the CPU between polls. */
    public void waitGtYield(long threshold, long mask) {
        await("doca_sync_event_wait_gt_yield", threshold, mask, -1, true);
    }

    /**
     * {@link #waitGt} with a bound [model: DOCA's wait has none; {@code doca_sync_event_task_*}
     * is DOCA's asynchronous form]: DOCA_ERROR_TIME_OUT when {@code timeout} passes first.
     */
    public void waitGt(long threshold, long mask, Duration timeout) {
        DocaException.check(timeout != null && !timeout.isNegative(), DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_sync_event_wait_gt: bad timeout " + timeout);
        long nanos;
        try {
            nanos = timeout.toNanos();
        } catch (ArithmeticException beyondLong) {
            nanos = -1; // longer than 292 years: unbounded
        }
        await("doca_sync_event_wait_gt", threshold, mask, nanos, false);
    }

    /** The threads inside a wait now (for tests that must know a waiter is parked before they act). */
    int waiting() {
        return waits.waiting();
    }

    /**
     * The wait ({@link SyncEventWaits#await}): it polls, rather than sleeps for a signal, while an
     * update can arrive without passing through this object (read at each turn: a DPA handle made
     * while a waiter sleeps — a kernel launch's completion on a CPU-only event — wakes it, and
     * from then on it polls).
     */
    private void await(String what, long threshold, long mask, long timeoutNanos, boolean yield) {
        waits.await(what, threshold, mask, timeoutNanos, yield, () -> value(what),
                () -> publisher != Location.CPU || subscriber == Location.DPA || hostHandle.made());
    }

    /** What {@link #counter} answers for a counter in DPA memory (no host page). */
    private static final MemorySegment DPA_MEMORY = MemorySegment.ofArray(new long[1]);

    /** The counter's page while started ({@link #DPA_MEMORY} for a DPA subscriber's); BAD_STATE (stopped, not started) or INVALID_VALUE (destroyed) naming {@code what}. */
    private MemorySegment counter(String what) {
        State s = state;
        MemorySegment pg = page;
        if (s == State.STARTED && pg != null) {
            return pg;
        }
        if (s == State.STARTED && dpaCounter != 0) {
            return DPA_MEMORY;
        }
        DocaException.check(s != State.DESTROYED, DocaError.DOCA_ERROR_INVALID_VALUE, what + ": the event was destroyed");
        throw new DocaException(DocaError.DOCA_ERROR_BAD_STATE, what + ": the event is " + (s == State.STOPPED ? "stopped" : "not started"));
    }

    // -------------------------------------------------------------------------------------- exports

    /**
     * {@code doca_sync_event_export_to_remote_net}: where the counter is and the key to reach it,
     * for a remote node to import ({@link DocaSyncEventRemoteNet#createFromExport}).
     *
     * @throws DocaException BAD_STATE (not started), NOT_SUPPORTED (the publisher is not a remote node)
     */
    public byte[] exportToRemoteNet() {
        String w = "doca_sync_event_export_to_remote_net";
        counter(w);
        DocaException.check(publisher == Location.REMOTE_NET, DocaError.DOCA_ERROR_NOT_SUPPORTED,
                w + ": the publisher must be a remote node (add_publisher_location_remote_net); it is " + publisher);
        if (dpaKey != 0) { // a DPA subscriber: the counter in DPA memory, its key of the DPA context
            DocaDev d = subscriberDpa.dev();
            return new SyncEventExportDesc(dpaKey, d.process().pid(), dpaCounter, d.asDevinfo().ibvDevice().nodeGuid(), id).toBytes();
        }
        return new SyncEventExportDesc(mr.rkey(), home.process().pid(), va, home.asDevinfo().ibvDevice().nodeGuid(), id).toBytes();
    }

    /**
     * {@code doca_sync_event_get_dpa_handle}: what {@code doca_dpa_dev_sync_event_*} take. For a
     * DPA subscriber, the DPA address of its counter; for a DPA publisher of a counter in host
     * memory (a CPU subscriber), a descriptor through which the DPA reaches the host page by its
     * window ({@code DocaDpaDevSyncEvent}), the same handle at every call [model].
     *
     * @throws DocaException INVALID_VALUE (null, no DPA location, another DPA context than the
     *         event's, a DPA context of another process than the CPU subscriber's), BAD_STATE (not
     *         started, or the DPA context not started), NOT_SUPPORTED (a context without DPA memory)
     */
    public long getDpaHandle(DocaDpaContext dpa) {
        String w = "doca_sync_event_get_dpa_handle";
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null DPA");
        DocaException.check(publisher == Location.DPA || subscriber == Location.DPA, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": neither the publisher nor the subscriber is a DPA location");
        DocaException.check(dpa == subscriberDpa || dpa == publisherDpa, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": " + dpa + " is not a location of this event");
        DocaException.check(dpa.hasDpaMemory(), DocaError.DOCA_ERROR_NOT_SUPPORTED, w + ": " + dpa + " has no DPA memory");
        MemorySegment pg = counter(w);
        return pg == DPA_MEMORY ? dpaCounter : hostDpaHandle(w, dpa);
    }

    /**
     * The DPA handle a kernel launch's last rank moves this event by
     * ({@code doca_dpa_kernel_launch_update_set/add}'s {@code comp_event}): {@link #getDpaHandle}
     * for an event with a DPA location; for a CPU-only event of {@code dpa}'s process (peerdirect's
     * chains use one as wait and completion event), the same window handle over its host page
     * [model: DOCA's samples give a DPA-published event].
     *
     * @throws DocaException as {@link #getDpaHandle}; INVALID_VALUE for a counter in another DPA
     *         context's memory or another process
     */
    public long kernelCompletionDpaHandle(DocaDpaContext dpa) {
        String w = "doca_dpa_kernel_launch (completion event)";
        if (publisher == Location.DPA || subscriber == Location.DPA) {
            return getDpaHandle(dpa);
        }
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null DPA");
        DocaException.check(dpa.hasDpaMemory(), DocaError.DOCA_ERROR_NOT_SUPPORTED, w + ": " + dpa + " has no DPA memory");
        counter(w);
        return hostDpaHandle(w, dpa);
    }

    /** The host counter's DPA handle for {@code dpa}, made once (one DPA context per event's host handle). */
    private long hostDpaHandle(String w, DocaDpaContext dpa) {
        DocaException.check(dpa.dev().process() == home.process(), DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": " + dpa + " is not of the counter's process (" + home + "); its window cannot reach the counter");
        long h = hostHandle.get(w, dpa, () -> {
            counter(w); // again under the handle's lock: a stop releases the handle after its state changed
            return va;
        });
        waits.wakeIfWaited(); // a CPU-only event's sleeping waiters: the DPA's updates will not signal them; they poll now
        return h;
    }

    /** The counter's address in its process (while started) [model: what the export carries]. */
    public long counterAddr() {
        counter("doca_sync_event counter address");
        return va;
    }

    /** {@code doca_sync_event_cap_is_export_to_remote_net_supported}: DOCA_SUCCESS on every device of this model. */
    public static DocaError capIsExportToRemoteNetSupported(DocaDevinfo devinfo) {
        return devinfo == null ? DocaError.DOCA_ERROR_INVALID_VALUE : DocaError.DOCA_SUCCESS;
    }

    /** {@code doca_sync_event_cap_remote_net_is_create_from_export_supported}: DOCA_SUCCESS on every device of this model. */
    public static DocaError capRemoteNetIsCreateFromExportSupported(DocaDevinfo devinfo) {
        return devinfo == null ? DocaError.DOCA_ERROR_INVALID_VALUE : DocaError.DOCA_SUCCESS;
    }

    /**
     * {@code doca_sync_event_cap_is_export_to_dpa_supported}: whether an event on this device can
     * have a DPA handle ({@link #getDpaHandle}): DOCA_SUCCESS when the device reports a DPA (its
     * DPA capability block, read for the call as libflexio reads it: the BlueField-3 here),
     * NOT_SUPPORTED otherwise (the ConnectX models, mlx4), DRIVER when the device cannot be asked.
     */
    public static DocaError capIsExportToDpaSupported(DocaDevinfo devinfo) {
        if (devinfo == null) {
            return DocaError.DOCA_ERROR_INVALID_VALUE;
        }
        try (org.peerdirect.ib.core.verbs.IbvContext c = devinfo.ibvDevice().open(devinfo.process())) {
            return org.peerdirect.flexio.FlexioHcaCaps.query(c).dpa() ? DocaError.DOCA_SUCCESS : DocaError.DOCA_ERROR_NOT_SUPPORTED;
        } catch (KernelException | org.peerdirect.flexio.FlexioException e) {
            return DocaError.DOCA_ERROR_DRIVER;
        }
    }

    @Override
    public String toString() {
        State s = state;
        MemorySegment pg = page;
        return "doca_sync_event " + id + " " + s.name().toLowerCase(java.util.Locale.ROOT) + ", publisher " + publisher + ", subscriber " + subscriber
 + (s == State.STARTED && dpaCounter != 0 ? String.format(", in DPA memory at 0x%x", dpaCounter) : "")
                + (s == State.STARTED && pg != null ? ", value " + Long.toUnsignedString((long) COUNTER.getVolatile(pg, 0L)) : "");
    }
}
