package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.progs.KernelProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * DOCA DPA threads with strict EU affinity and local storage, triggered by notification
 * completions from an RPC (the shape of DPA_MODEL.md §4 scenario 10, DOCA's {@code dpa_nvqual}),
 * each adding 1 to a DPA sync event the host waits on; a thread not run ignores its notification.
 * Each test ends with no DPA object and the machine's audit clean.
 */
class DocaDpaThreadTest extends DpaLabFixture {

    private static final Duration BOUND = Duration.ofSeconds(60);
    /** The RTOS keeps EUs 0 and 1 (BlueField-3's 2 reserved). */
    private static final int FIRST_EU = 2;

    private DocaSyncEvent ev;

    DocaDpaThreadTest() {
        super(KernelProgsStubs.APP);
    }

    @BeforeEach
    void up() {
        ev = dpaEvent(); // destroyed by the fixture's teardown before it stops the DPA context
    }

    private long load(long daddr) {
        return dpa.rpc(KernelProgsStubs.LOAD64, daddr);
    }

    private static byte[] le(long[] v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }

    @Test
    void oneThreadPerEuNotifiedFromAnRpc() {
        int n = 8;
        long storage = dpa.memAlloc(16L * n);
        dpa.memset(storage, 0, 16L * n);
        List<DocaDpaThread> threads = new ArrayList<>();
        List<DocaDpaNotificationCompletion> notes = new ArrayList<>();
        List<DocaDpaEuAffinity> affs = new ArrayList<>();
        long[] handles = new long[n];
        for (int i = 0; i < n; i++) {
            DocaDpaThread t = DocaDpaThread.create(dpa);
            t.setFuncArg(KernelProgsStubs.EU_WORKER, ev.getDpaHandle(dpa));
            t.setLocalStorage(storage + 16L * i);
            DocaDpaEuAffinity a = DocaDpaEuAffinity.create(dpa);
            a.set(FIRST_EU + i);
            t.setAffinity(a);
            t.start();
            DocaDpaNotificationCompletion c = DocaDpaNotificationCompletion.create(dpa, t);
            c.start();
            handles[i] = c.getDpaHandle();
            if (i != n - 1) { // the last one is started but not run: it must ignore its notification
                t.run();
            }
            threads.add(t);
            notes.add(c);
            affs.add(a);
        }
        long hs = dpa.memAlloc(8L * n);
        dpa.h2dMemcpy(hs, le(handles));
        assertEquals(n, dpa.rpc(KernelProgsStubs.NOTIFY_ALL, hs, n));
        ev.waitGt(n - 2, -1L, BOUND);
        for (int i = 0; i < n - 1; i++) {
            assertEquals(FIRST_EU + i + 1, load(storage + 16L * i), "thread " + i + " ran on its EU (strict affinity)");
            assertEquals(1, load(storage + 16L * i + 8), "thread " + i + " ran once");
        }
        assertEquals(n - 1, ev.get(), "n-1 adds: the thread not run ignored its notification");
        assertEquals(0, load(storage + 16L * (n - 1) + 8), "the thread not run never ran");

        threads.get(n - 1).run();
        dpa.rpc(KernelProgsStubs.NOTIFY_ALL, hs + 8L * (n - 1), 1);
        ev.waitGt(n - 1, -1L, BOUND);
        assertEquals(n, ev.get());
        assertEquals(FIRST_EU + n, load(storage + 16L * (n - 1)));

        assertEquals(DocaError.DOCA_ERROR_IN_USE, assertThrows(DocaException.class, dpa::stop).error(), "stop with live threads");
        notes.forEach(c -> {
            c.stop();
            c.destroy();
        });
        threads.forEach(DocaDpaThread::destroy);
        affs.forEach(DocaDpaEuAffinity::destroy);
    }

    @Test
    void threadCallsInTheWrongOrder() {
        DocaDpaThread t = DocaDpaThread.create(dpa);
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class, t::run).error(), "run before start");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class, t::start).error(), "start without a function");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class,
                () -> t.setFuncArg(KernelProgsStubs.LOAD64, 0)).error(), "an RPC as thread function");
        DocaDpaNotificationCompletion c = DocaDpaNotificationCompletion.create(dpa, t);
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class, c::start).error(), "the thread is not started");
        t.setFuncArg(KernelProgsStubs.EU_WORKER, ev.getDpaHandle(dpa));
        DocaDpaEuAffinity reserved = DocaDpaEuAffinity.create(dpa);
        reserved.set(0);
        t.setAffinity(reserved);
        DocaException e = assertThrows(DocaException.class, t::start);
        assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), "EU 0 is the RTOS's: " + e.getMessage());
        reserved.clear();
        t.setAffinity(reserved);
        t.start();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class,
                () -> t.setFuncArg(KernelProgsStubs.EU_WORKER, 0)).error(), "set after start");
        t.run();
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, assertThrows(DocaException.class, t::run).error(), "run twice");
        c.destroy();
        t.destroy();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class, t::destroy).error(), "double destroy");
        reserved.destroy();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, assertThrows(DocaException.class, reserved::destroy).error());
    }

    /**
     * {@code dpa:doca} reads a thread under its context's lock ({@link DocaDpaThread#snapshot}); run and
     * stop change its state under that lock too, so a reader holding it sees one state. (run wrote
     * "running" without the lock: a reader holding it saw the state change under it; stop wrote
     * "stopped" after letting the lock go, leaving a window where a started thread had no DPA thread.)
     */
    @Test
    void runAndStopChangeTheStateOnlyUnderTheContextsLock() throws Exception {
        DocaDpaThread t = DocaDpaThread.create(dpa);
        t.setFuncArg(KernelProgsStubs.EU_WORKER, 0);
        t.start();
        assertEquals("started", whileReaderHoldsTheLock(t, t::run));
        assertEquals("running", state(t));
        assertEquals("running", whileReaderHoldsTheLock(t, t::stop));
        assertEquals("stopped", state(t));
        t.destroy();
    }

    /** The same for a notification completion: start, stop and destroy change what dpa:doca lists for its thread only under the lock. */
    @Test
    void aNotificationCompletionChangesOnlyUnderTheContextsLock() throws Exception {
        DocaDpaThread t = DocaDpaThread.create(dpa);
        t.setFuncArg(KernelProgsStubs.EU_WORKER, 0);
        t.start();
        DocaDpaNotificationCompletion c = DocaDpaNotificationCompletion.create(dpa, t);
        assertEquals("[]", whileReaderHoldsTheLock(() -> t.snapshot().completions().toString(), c::start));
        assertEquals("[notification completion started, handle " + c.getDpaHandle() + "]",
                whileReaderHoldsTheLock(() -> t.snapshot().completions().toString(), c::stop));
        assertEquals("[]", whileReaderHoldsTheLock(() -> t.snapshot().completions().toString(), c::destroy));
        t.destroy();
    }

    private String state(DocaDpaThread t) {
        dpa.lock.lock();
        try {
            return t.snapshot().state();
        } finally {
            dpa.lock.unlock();
        }
    }

    /**
     * Holds the context's lock as {@code dpa:doca} does while {@code op} runs on another thread, until
     * {@code op} is done or waits for the lock; the state the reader saw first, which it must still
     * see at the end of its hold.
     */
    private String whileReaderHoldsTheLock(DocaDpaThread t, Runnable op) throws InterruptedException {
        return whileReaderHoldsTheLock(() -> t.snapshot().state(), op);
    }

    /** {@link #whileReaderHoldsTheLock(DocaDpaThread, Runnable)} for any view {@code read} under the lock. */
    private String whileReaderHoldsTheLock(java.util.function.Supplier<String> read, Runnable op) throws InterruptedException {
        Thread s;
        String before;
        String after;
        dpa.lock.lock();
        try {
            before = read.get();
            s = Thread.ofPlatform().name("doca-op").start(op);
            while (s.isAlive() && !dpa.lock.hasQueuedThread(s)) {
                Thread.onSpinWait(); // not a sleep: waits for the op's end or its turn on the lock
            }
            after = read.get();
        } finally {
            dpa.lock.unlock();
        }
        assertEquals(true, s.join(BOUND), "the op ends once the lock is free");
        assertEquals(before, after, "what dpa:doca shows changed while a reader held the context's lock");
        return before;
    }
}
