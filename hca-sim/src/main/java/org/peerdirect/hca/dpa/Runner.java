package org.peerdirect.hca.dpa;

import java.util.concurrent.Semaphore;

import org.peerdirect.hca.dpa.isa.Hart;
import org.peerdirect.hca.dpa.isa.Space;
import org.peerdirect.hca.dpa.isa.ThreadCtx;

/**
 * One activation of a DPA thread on an EU: the {@link Hart} device code calls through
 * {@code Dpa}. It decodes addresses (process memory, the EU's outbox page, window apertures),
 * checks alignment and bounds (C5: fatal), charges the virtual cost of each op to the EU's
 * counters and to the activation's watchdog, and gives the scheduler its point. A continuable
 * yield keeps the runner (and its Java stack) across activations.
 *
 * <p>Cost table ("peerdirect model", not hardware latencies): 1 cycle per ISA call, 4 for an
 * atomic, a fence or a write-back, 16 for a system call; {@code time} counts cycles.
 */
final class Runner implements Hart {

    final DpaUnit unit;
    final DpaThread thread;
    /** The baton of the deterministic scheduler, the wake-up of a blocked continuable yield. */
    final Semaphore turn = new Semaphore(0);
    /** The EU it runs on; -1 while suspended or stopped. Written under the RTOS lock. */
    volatile int eu;
    volatile boolean killed;
    /** The Java thread running the activation (its stack gives the wall-clock watchdog the stuck line); null before it starts. */
    volatile Thread javaThread;
    /** ISA calls so far (written by the runner only; the wall-clock watchdog reads them). */
    volatile long calls;
    /** Waiting in the scheduler for a carrier or a resume: not stuck in device code. */
    volatile boolean inScheduler;
    /** Given up by the wall-clock watchdog (RTOS lock): its EU and thread were let go; its end only leaves the scheduler. */
    volatile boolean abandoned;
    long activationCycles;
    int sinceYield;
    /**
     * The wake's hops for {@link DpaEvents.Wake} (nanoTime; 0: not stamped): EU granted (RTOS lock),
     * virtual thread running and carrier permit taken (the activation's own thread). Stamped only
     * while a recording wants the event; the semaphore or the thread start between the writers
     * orders them.
     */
    volatile long grantedNanos;
    long mountedNanos;
    long carrierNanos;
    /**
     * Spin-wait elision ({@link PollWaits}): loads of DPA memory in a row with nothing but fences
     * between them, the memory's write count when the row began, the row's first cycle and time.
     * The runner's own fields (single writer).
     */
    private int quiet;
    private long quietEpoch;
    private long quietCycles;
    private long quietNanos;
    /** The lines the quiet row loaded: only a write to them wakes the hart once it waits. */
    private final PollWaits.Watch watch = new PollWaits.Watch();
    /** The last poll wait ended by a write to its lines: traffic flows, so the next one spins first, once ({@link DpaConfig#pollSpin}). */
    private boolean flowing;
    /** The next poll wait's bound ({@link #POLL_WAIT_NANOS}). */
    private long waitBound = POLL_WAIT_NANOS;
    /** Loads of unchanged memory in a row after which a hart waits for a write. */
    static final int POLL_QUIET = 64;
    /**
     * The first such wait's bound: a write no one counted (only the allocator's zero fill of a new
     * region is not) costs at most this. Each wait that ends by its bound doubles the next one's,
     * up to {@link #POLL_WAIT_MAX_NANOS}; a wait a write ended starts again here. Counted writes wake
     * a waiter whatever its bound, so the doubling only spares an idle poller the wake-ups: at a
     * fixed 100 µs its carrier was busy ~40 % of the time (mount, 64 loads, park; PollWaitTest).
     */
    static final long POLL_WAIT_NANOS = 100_000;
    static final long POLL_WAIT_MAX_NANOS = 10_000_000;

    Runner(DpaUnit unit, DpaThread thread, int eu) {
        this.unit = unit;
        this.thread = thread;
        this.eu = eu;
    }

    String name() {
        return thread.name();
    }

    /** The activation's trampoline: the entry point, then how it ended, to the RTOS. */
    void body() {
        DpaEvents.Activation event = DpaEvents.Activation.start();
        ActivationExit.Kind kind;
        javaThread = Thread.currentThread();
        long at = thread.triggeredAt;
        if (at != 0) {
            thread.triggeredAt = 0;
            unit.wake.record(System.nanoTime() - at);
        }
        DpaEvents.Wake.commit(this, "start", at);
        try {
            unit.mm.activationStart(thread);
            kind = ScopedValue.where(Hart.CURRENT, this).call(this::invokeEntry);
        } catch (ActivationExit e) {
            kind = e.kind;
        } catch (Throwable e) {
            String site = trapSite(e);
            unit.fail(thread.process, ProcessStatus.HANDLER_TRAP, "handler " + thread.name() + " trapped: " + e + " at " + site, thread.id, site);
            kind = ActivationExit.Kind.PROCESS_END;
        }
        unit.objects.activationEnded(thread); // a call it unwound from (a process error) holds nothing any more
        if (abandoned) { // its thread, windows and EU were let go by the watchdog; its process is gone or going
            unit.rtos.activationEnded(this, ActivationExit.Kind.PROCESS_END);
            return;
        }
        if (kind != ActivationExit.Kind.PROCESS_END) {
            for (int i = 0; i < 2; i++) {
                unit.windows.leftDirty(thread, thread.entities[i], "the end of an activation (" + kind + ")", true);
            }
            if (thread.process.ended) {
                kind = ActivationExit.Kind.PROCESS_END;
            }
        }
        DpaEvents.Activation.done(event, thread, eu, kind, activationCycles); // before the RTOS takes the EU back
        unit.rtos.activationEnded(this, kind);
    }

    /** A handler that returns normally is rescheduled (an RPC's result is kept first). */
    private ActivationExit.Kind invokeEntry() throws Throwable {
        tick(16);
        if (thread.entry.rpc()) {
            thread.rpcResult = (long) thread.handle.invokeExact(thread.arg);
        } else {
            thread.handle.invokeExact(thread.arg);
        }
        return ActivationExit.Kind.RESCHEDULE;
    }

    private static String trapSite(Throwable e) {
        for (StackTraceElement f : e.getStackTrace()) {
            if (f.getClassLoaderName() != null && f.getClassLoaderName().startsWith(ImageLoader.NAME)) {
                return f.getClassName() + "." + f.getMethodName() + ":" + f.getLineNumber();
            }
        }
        return "?";
    }

    /** One ISA op that is not a poll (it may change memory, or read what memory is not): the row of loads ends. */
    private void tick(int cost) {
        quiet = 0;
        step(cost);
    }

    /** One ISA op: counters, watchdog, scheduling point, and the process still alive. */
    private void step(int cost) {
        calls++; // the runner's own field: single writer
        checkAlive();
        int e = eu;
        unit.eus.cycles[e] += cost;
        unit.eus.instRet[e]++;
        activationCycles += cost;
        if (activationCycles > unit.config.watchdogCycles()) {
            throw abort(ProcessStatus.WATCHDOG, "watchdog: handler " + thread.name() + " ran past "
                    + unit.config.watchdogCycles() + " cycles in one activation, last at " + Sites.here());
        }
        unit.scheduler.point(this);
        checkAlive();
    }

    void checkAlive() {
        if (killed || thread.process.ended) {
            throw new ActivationExit(ActivationExit.Kind.PROCESS_END);
        }
    }

    /** Ends the process with {@code status} and gives the exception that unwinds this activation. */
    ActivationExit abort(int status, String message) {
        unit.fail(thread.process, status, message);
        return new ActivationExit(ActivationExit.Kind.PROCESS_END);
    }

    /** A recoverable failure of a device call: errno set, non-zero returned. */
    int failSoft() {
        thread.errno = 1;
        return 1;
    }

    /** C5 and bounds: aligned, inside the process's memory. */
    private void checkMemory(long a, int bytes) {
        if ((a & (bytes - 1)) != 0) {
            throw abort(ProcessStatus.UNALIGNED, "unaligned " + bytes + "-byte access at 0x" + Long.toHexString(a)
                    + " at " + Sites.here());
        }
        if (a < 0 || a + bytes > unit.memory.size() || !thread.process.owns(a, bytes)) {
            throw abort(ProcessStatus.ACCESS_FAULT, bytes + "-byte access at 0x" + Long.toHexString(a)
                    + " outside process " + thread.process.id + "'s memory at " + Sites.here());
        }
    }

    @Override
    public long load(long daddr, int bytes) {
        step(1);
        if (Windows.isWindow(daddr) || OutboxPage.isOutbox(daddr)) {
            quiet = 0; // host memory changes behind the window unseen here; the outbox is no memory
        }
        if (Windows.isWindow(daddr)) {
            alignedMmio(daddr, bytes);
            return unit.windows.load(this, daddr, bytes);
        }
        if (OutboxPage.isOutbox(daddr)) {
            outboxAddress(daddr, bytes);
            return 0; // the doorbell registers read as zero
        }
        checkMemory(daddr, bytes);
        if (quiet == 0) { // before the load: a write after it moves the count
            quietEpoch = unit.mm.polls.epoch();
            quietCycles = activationCycles;
            quietNanos = System.nanoTime();
            watch.reset();
        }
        watch.add(daddr);
        long v = unit.mm.load(this, daddr, bytes);
        if (++quiet >= POLL_QUIET) {
            quiet = 0;
            awaitWrite();
        }
        return v;
    }

    /**
     * {@link #POLL_QUIET} loads of DPA memory in a row and nothing wrote DPA memory since the first:
     * the hart polls what cannot have changed. It waits for a write to a line the row loaded
     * ({@link #watch}; at most {@link #waitBound}) with its carrier given up, then goes on
     * polling; the cycles it would have spent polling meanwhile, at the row's rate, are charged (the
     * watchdog sees a polling hart). When its last wait was ended by a write and
     * {@link DpaConfig#pollSpin} is set, it first spins that long on the write count, carrier kept.
     */
    private void awaitWrite() {
        PollWaits polls = unit.mm.polls;
        if (!unit.config.elidePolls() || polls.epoch() != quietEpoch) {
            return;
        }
        long start = System.nanoTime();
        double rate = (activationCycles - quietCycles) / (double) Math.max(1, start - quietNanos);
        long seen = quietEpoch;
        long spin = unit.config.pollSpin().toNanos();
        DpaEvents.PollWait trace = DpaEvents.PollWait.start();
        watch.trace = trace;
        String outcome;
        if (flowing && spin > 0 && !unit.config.deterministic() && polls.spin(seen, spin)) {
            outcome = "SPUN";
            // the spin watches the write count, not the row's lines: the write that ended it may be
            // anyone's, so the next quiet row waits (line-filtered); only a wait its own lines' write
            // ended makes the hart spin again (else unrelated traffic kept it spinning, carrier held)
            flowing = false;
        } else if (unit.scheduler.pollWait(this, () -> flowing = polls.await(seen, waitBound, watch))) {
            outcome = flowing ? "WOKEN" : Thread.currentThread().isInterrupted() ? "INTERRUPTED" : "BOUND";
            waitBound = flowing ? POLL_WAIT_NANOS : Math.min(2 * waitBound, POLL_WAIT_MAX_NANOS);
        } else {
            return; // the deterministic scheduler: no wait, the hart polls on
        }
        DpaEvents.PollWait.done(trace, thread.id, outcome);
        long cycles = (long) ((System.nanoTime() - start) * rate);
        unit.eus.cycles[eu] += cycles;
        activationCycles += cycles;
        step(0);
    }

    @Override
    public void store(long daddr, int bytes, long value) {
        tick(1);
        if (Windows.isWindow(daddr)) {
            alignedMmio(daddr, bytes);
            unit.windows.store(this, daddr, bytes, value);
        } else if (OutboxPage.isOutbox(daddr)) {
            outboxAddress(daddr, bytes);
            OutboxPage.store(this, (int) (daddr & (OutboxPage.PAGE - 1)), value);
            checkAlive();
        } else {
            checkMemory(daddr, bytes);
            unit.mm.store(this, daddr, bytes, value);
        }
    }

    private void alignedMmio(long daddr, int bytes) {
        if ((daddr & (bytes - 1)) != 0) {
            throw abort(ProcessStatus.UNALIGNED, "unaligned " + bytes + "-byte window access at 0x"
                    + Long.toHexString(daddr) + " at " + Sites.here());
        }
    }

    private void outboxAddress(long daddr, int bytes) {
        if (bytes != 8 || (daddr & 7) != 0 || daddr - OutboxPage.pageOf(eu) < 0 || daddr - OutboxPage.pageOf(eu) >= OutboxPage.PAGE) {
            throw abort(ProcessStatus.OUTBOX_FAULT, bytes + "-byte outbox access at 0x" + Long.toHexString(daddr)
                    + ": only 64-bit accesses to this EU's page (0x" + Long.toHexString(OutboxPage.pageOf(eu)) + ") at "
                    + Sites.here());
        }
    }

    @Override
    public long atomic(AtomicOp op, long daddr, int bytes, long operand, long expect) {
        tick(4);
        checkMemory(daddr, bytes);
        return unit.mm.atomic(this, op, daddr, bytes, operand, expect);
    }

    @Override
    public void fence(Space space, int pred, int succ) {
        step(4); // a fence changes no memory: a poll loop's fence keeps the row
        unit.mm.fence(this, space, pred, succ);
    }

    @Override
    public void memoryWriteback() {
        tick(4);
        unit.mm.writeback(this);
    }

    @Override
    public void windowWriteback() {
        tick(4);
        unit.windows.writeback(this);
    }

    @Override
    public void windowReadInv() {
        tick(4);
        unit.windows.readInv(this);
    }

    @Override
    public void compilerBarrier() {
        step(1);
    }

    @Override
    public long counter(Counter c) {
        tick(1);
        return c == Counter.INST_RET ? unit.eus.instRet[eu] : unit.eus.cycles[eu];
    }

    @Override
    public void exit(Exit kind) {
        tick(16);
        switch (kind) {
            case RESCHEDULE -> {
                unit.cqs.lostWakeup(thread);
                checkAlive();
                throw new ActivationExit(ActivationExit.Kind.RESCHEDULE);
            }
            case FINISH -> throw new ActivationExit(ActivationExit.Kind.FINISH);
            case RETRIGGER -> throw new ActivationExit(ActivationExit.Kind.RETRIGGER);
            case PROCESS_FINISH -> throw abort(ProcessStatus.PROCESS_FINISH, "flexio_dev_process_finish by "
                    + thread.name());
        }
    }

    @Override
    public void yieldContinuable() {
        tick(16);
        if (!thread.continuable) {
            return;
        }
        unit.rtos.suspend(this);
        unit.scheduler.block(this);
        DpaEvents.Wake.commit(this, "resume", thread.triggeredAt);
        activationCycles = 0;
        checkAlive();
        unit.mm.activationStart(thread);
    }

    @Override
    public void error(int code) {
        tick(16);
        int status = code >= 0x80 && code <= 0xff ? code : ProcessStatus.ILLEGAL_ERR;
        throw abort(status, "flexio_dev_error(0x" + Integer.toHexString(code) + ") by " + thread.name() + " at " + Sites.here());
    }

    @Override
    public ThreadCtx threadCtx() {
        tick(16);
        return new ThreadCtx(thread.id, thread.tls, thread.arg, OutboxPage.pageOf(eu), eu);
    }

    @Override
    public int activate(int threadId) {
        tick(16);
        return unit.activate(thread, threadId) ? 0 : failSoft();
    }

    @Override
    public int errno(boolean reset) {
        tick(1);
        int e = thread.errno;
        if (reset) {
            thread.errno = 0;
        }
        return e;
    }

    @Override
    public int outboxConfig(int outboxId) {
        tick(16);
        Outbox o = unit.outbox(outboxId);
        if (o == null || o.process() != thread.process) {
            return failSoft();
        }
        thread.outbox = o;
        return 0;
    }

    @Override
    public int windowConfig(int entity, int windowId, int mkey) {
        tick(16);
        int rc = unit.windows.config(this, entity, windowId, mkey);
        checkAlive();
        return rc;
    }

    @Override
    public int fxp(Fxp op, int x) {
        tick(FxpUnit.CYCLES);
        return switch (op) {
            case LOG2 -> FxpUnit.log2(x);
            case RCP -> FxpUnit.rcp(x);
            case POW2 -> FxpUnit.pow2(x);
        };
    }

    /**
     * The indirect call: {@code __dpa_rpc__} entry {@code symbol} of the thread's own process runs
     * inside this activation (its ISA calls are this hart's), as a call through a function pointer.
     */
    @Override
    public long call(int symbol, long arg) {
        tick(4);
        java.lang.invoke.MethodHandle h = thread.process.rpcEntry(symbol);
        if (h == null) {
            throw abort(ProcessStatus.ILLEGAL_ERR, "call of symbol " + symbol + ", which is no __dpa_rpc__ entry of process "
                    + thread.process.id + "'s image, by " + thread.name() + " at " + Sites.here());
        }
        long result;
        try {
            result = (long) h.invokeExact(arg);
        } catch (RuntimeException | Error e) {
            throw e; // ActivationExit and traps unwind to the trampoline, as from the thread's own entry
        } catch (Throwable e) {
            throw new IllegalStateException(e);
        }
        // an RPC is the entry's unit of work, as an activation is a handler's: window data it left
        // dirty is C3 now, before the caller's own write-back could carry it out unnoticed ([model])
        for (int i = 0; i < 2; i++) {
            unit.windows.leftDirty(thread, thread.entities[i], "the return of __dpa_rpc__ entry " + symbol, true);
        }
        checkAlive();
        return result;
    }

    /**
     * C8's annotations ({@link ObjectUse}): not an instruction of the DPA, so no cycles and no
     * scheduling point (the library call's own ISA calls are the points where another hart can
     * come in); with the checker off, one field check.
     */
    @Override
    public void objectEnter(long object) {
        if (unit.mm.mode != CheckMode.OFF) {
            unit.objects.enter(this, object);
        }
    }

    @Override
    public void objectLeave(long object) {
        if (unit.mm.mode != CheckMode.OFF) {
            unit.objects.leave(this, object);
        }
    }

    @Override
    public long windowPtrAcquire(int entity, long haddr) {
        tick(16);
        return unit.windows.ptrAcquire(this, entity, haddr);
    }
}
