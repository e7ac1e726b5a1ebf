package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.doca.dpa.progs.AsyncProgs.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevAsyncOps;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.progs.AsyncProgsStubs;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * DOCA DPA async ops: a DPA thread posts {@code doca_dpa_dev_post_memcpy} copies between maps of
 * host memory and of the DPA heap (the bytes moved by the NIC through the IOMMU), and its
 * completion context hands out one completion per reported copy with the ops' user data;
 * OPTIMIZE_REPORTS batches them; bad input ends in an error completion or a named process error,
 * never a hang; calls out of order answer DOCA's errors; a post rung without its write-back is C1.
 * Every test ends with nothing left (the lab's close checks the IOMMU audit and the firmware).
 */
class DocaDpaAsyncOpsTest {

    private static final Duration BOUND = Duration.ofSeconds(60);
    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE;
    private static final long USER_DATA = 0x1234_5678_9abcL;

    @TempDir
    Path tmp;
    private DpaLab lab;
    private DocaDev dev;
    private DocaDpa dpa;
    private final List<Runnable> undo = new ArrayList<>();
    /** The test stopped the DPA context itself. */
    private boolean stopped;

    @BeforeEach
    void up() {
        lab = new DpaLab(tmp);
        dev = lab.open(0);
        dpa = DocaDpa.create(dev);
        dpa.setApp(AsyncProgsStubs.APP);
        dpa.start();
    }

    @AfterEach
    void down() {
        for (int i = undo.size() - 1; i >= 0; i--) {
            undo.get(i).run();
        }
        if (!stopped) {
            dpa.stop();
        }
        dpa.destroy();
        assertEquals(List.of(), lab.dpa().stream().filter(l -> !l.startsWith("eu")).toList(), "no DPA process left");
        dev.close();
        lab.close();
    }

    private static DocaError status(Executable e) {
        return assertThrows(DocaException.class, e).error();
    }

    private long alloc(long n) {
        long d = dpa.memAlloc(n);
        dpa.memset(d, 0, n);
        undo.add(() -> dpa.memFree(d));
        return d;
    }

    /** {@code n} bytes of the user process's memory, zero, populated. */
    private long hostBuf(int n) {
        long va = lab.proc.mmap(n);
        lab.proc.populate(va, n, true);
        undo.add(() -> lab.proc.munmap(va, n));
        return va;
    }

    private int hostMap(long va, long len, int permissions) {
        DocaMmap m = DocaMmap.create();
        m.setMemrange(va, len);
        m.setPermissions(permissions);
        m.addDev(dev);
        m.start();
        undo.add(m::destroy);
        return m.devGetDpaHandle(dev);
    }

    private int dpaMap(long daddr, long len) {
        DocaMmap m = DocaMmap.create();
        m.setDpaMemrange(dpa, daddr, len);
        m.setPermissions(RW);
        m.addDev(dev);
        m.start();
        undo.add(m::destroy);
        return m.devGetDpaHandle(dev);
    }

    private static byte[] pattern(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + seed);
        }
        return b;
    }

    private byte[] hostRead(long va, int n) {
        byte[] b = new byte[n];
        lab.proc.read(va, b, 0, n);
        return b;
    }

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }

    /** A started thread with its completion context (its own, or none), and started async ops attached to it. */
    private record Ops(DocaDpaThread thread, DocaDpaCompletion comp, DocaDpaAsyncOps ops, long arg) {
    }

    private Ops ops(int queueSize, long userData) {
        return ops(queueSize, userData, AsyncProgsStubs.COPIER);
    }

    private Ops ops(int queueSize, long userData, org.peerdirect.flexio.FlexioFunc func) {
        DocaDpaThread t = DocaDpaThread.create(dpa);
        undo.add(t::destroy);
        long arg = alloc(A_SIZE);
        t.setFuncArg(func, arg);
        t.start();
        DocaDpaCompletion comp = DocaDpaCompletion.create(dpa, 64);
        undo.add(comp::destroy);
        comp.setThread(t);
        comp.start();
        DocaDpaAsyncOps ops = DocaDpaAsyncOps.create(dpa, queueSize, userData);
        undo.add(() -> {
            try {
                ops.stop();
            } catch (DocaException e) {
                assertEquals(DocaError.DOCA_ERROR_BAD_STATE, e.error(), "stopped already");
            }
            ops.destroy();
        });
        ops.attach(comp);
        ops.start();
        return new Ops(t, comp, ops, arg);
    }

    /** What the copier recorded: the completions it got (type, user data, syndrome, WQE counter each), and whether it gave up polling. */
    private record Report(List<long[]> completions, boolean timedOut) {
    }

    /** Runs the copier on {@code o}'s thread: {@code n} copies of {@code len} bytes in {@code mode}; waits for its done event. */
    private Report copy(Ops o, int n, int mode, int dstKey, long dst, int srcKey, long src, long len) {
        DocaSyncEvent done = DocaSyncEvent.create();
        done.addPublisherLocationDpa(dpa);
        done.addSubscriberLocationDpa(dpa);
        done.start();
        undo.add(done::destroy);
        DocaDpaNotificationCompletion notif = DocaDpaNotificationCompletion.create(dpa, o.thread());
        undo.add(notif::destroy);
        notif.start();
        long arg = o.arg();
        dpa.h2dMemcpy(arg, le(o.ops().getDpaHandle(), o.comp().getDpaHandle(), n, mode, dstKey, dst, srcKey, src, len, done.getDpaHandle(dpa)));
        o.thread().run();
        dpa.rpc(AsyncProgsStubs.NOTIFY, notif.getDpaHandle());
        done.waitGt(0, -1L, BOUND);
        ByteBuffer r = ByteBuffer.wrap(dpa.d2hMemcpy(arg, A_SIZE)).order(ByteOrder.LITTLE_ENDIAN);
        List<long[]> got = new ArrayList<>();
        for (int i = 0; i < r.getLong(A_NCOMP) && i < 64; i++) {
            int at = A_LOG + 32 * i;
            got.add(new long[] {r.getLong(at), r.getLong(at + 8), r.getLong(at + 16), r.getLong(at + 24)});
        }
        return new Report(got, r.getLong(A_TIMED_OUT) != 0);
    }

    private static void assertReported(Report r, int... wqeCounters) {
        assertEquals(false, r.timedOut(), "every copy was covered by a completion");
        assertEquals(wqeCounters.length, r.completions().size(), "completions");
        for (int i = 0; i < wqeCounters.length; i++) {
            long[] c = r.completions().get(i);
            assertEquals(DocaDpaDevCompletion.COMP_SEND, c[0], "completion " + i + ": type SEND");
            assertEquals(USER_DATA & 0xffffffffL, c[1], "completion " + i + ": the async ops' user data (its low 32 bits)");
            assertEquals(0, c[2], "completion " + i + ": no error syndrome");
            assertEquals(wqeCounters[i], c[3], "completion " + i + ": WQE counter");
        }
    }

    @Test
    void copiesFromHostMemoryIntoTheDpaHeapCompleteOneByOneWithTheUserData() {
        int len = 1024;
        byte[] data = pattern(4 * len, 7);
        long src = hostBuf(4 * len);
        lab.proc.write(src, data, 0, data.length);
        long dst = alloc(4 * len);
        Ops o = ops(8, USER_DATA);
        Report r = copy(o, 4, MODE_EACH, dpaMap(dst, 4 * len), dst, hostMap(src, 4 * len, RW), src, len);
        assertReported(r, 0, 1, 2, 3);
        assertArrayEquals(data, dpa.d2hMemcpy(dst, 4 * len), "every byte reached the DPA heap");
        List<String> lines = new DocaDpaRegistry().contexts().stream().filter(c -> c.pid() == lab.proc.pid())
                .flatMap(c -> c.threads().stream()).flatMap(t -> t.completions().stream()).toList();
        assertTrue(lines.stream().anyMatch(l -> l.contains("doca_dpa_async_ops qp 0x") && l.contains("queue 8, user data " + USER_DATA)),
                "dpa:doca shows the async ops in its completion context's line: " + lines);
    }

    @Test
    void copiesFromTheDpaHeapIntoHostMemory() {
        int len = 4096;
        byte[] data = pattern(2 * len, 3);
        long src = alloc(2 * len);
        dpa.h2dMemcpy(src, data);
        long dst = hostBuf(2 * len);
        Report r = copy(ops(4, USER_DATA), 2, MODE_EACH, hostMap(dst, 2 * len, RW), dst, dpaMap(src, 2 * len), src, len);
        assertReported(r, 0, 1);
        assertArrayEquals(data, hostRead(dst, 2 * len), "every byte reached host memory");
    }

    @Test
    void copiesBetweenTwoMapsOfHostMemory() {
        int len = 3000; // not a multiple of a page: the second copy crosses one
        byte[] data = pattern(3 * len, 11);
        long src = hostBuf(3 * len);
        lab.proc.write(src, data, 0, data.length);
        long dst = hostBuf(3 * len);
        Report r = copy(ops(4, USER_DATA), 3, MODE_EACH, hostMap(dst, 3 * len, RW), dst,
                hostMap(src, 3 * len, DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_ONLY), src, len);
        assertReported(r, 0, 1, 2);
        assertArrayEquals(data, hostRead(dst, 3 * len));
    }

    /**
     * DOCA's continuation pattern B: each completion of a copy wakes the thread (it requested
     * notification and rescheduled), which posts the next; 5 copies, 5 completions, 6 activations.
     */
    @Test
    void eachCompletionWakesTheThreadThatPostsTheNextCopy() {
        int len = 256;
        int n = 5;
        byte[] data = pattern(n * len, 13);
        long src = hostBuf(n * len);
        lab.proc.write(src, data, 0, data.length);
        long dst = alloc(n * len);
        Ops o = ops(2, USER_DATA, AsyncProgsStubs.CHAINED);
        Report r = copy(o, n, MODE_EACH, dpaMap(dst, n * len), dst, hostMap(src, n * len, RW), src, len);
        assertReported(r, 0, 1, 2, 3, 4);
        assertArrayEquals(data, dpa.d2hMemcpy(dst, n * len));
        assertEquals(n + 1, o.thread().activations(), "the notification, then one activation per completion");
    }

    /** OPTIMIZE_REPORTS on all but the last: one completion (the last copy's) covers the batch, and every byte moved. */
    @Test
    void optimizeReportsGivesOneCompletionForTheBatchAndEveryByteMoves() {
        int len = 512;
        int n = 8;
        byte[] data = pattern(n * len, 5);
        long src = alloc(n * len);
        dpa.h2dMemcpy(src, data);
        long dst = hostBuf(n * len);
        Report r = copy(ops(n, USER_DATA), n, MODE_BATCH, hostMap(dst, n * len, RW), dst, dpaMap(src, n * len), src, len);
        assertReported(r, n - 1);
        assertArrayEquals(data, hostRead(dst, n * len), "the unreported copies moved their bytes too");
    }

    /**
     * A host map's DPA handle is of a started DPA context: the same key while it runs; when the
     * context stops first the key goes with its process, the map's destroy after it leaves nothing
     * pinned (the lab's close checks), and without a started context there is no handle.
     */
    @Test
    void aHostMapsDpaHandleGoesWithItsDpaContext() {
        long buf = hostBuf(8192);
        DocaMmap m = DocaMmap.create();
        m.setMemrange(buf, 8192);
        m.setPermissions(RW);
        m.addDev(dev);
        m.start();
        int key = m.devGetDpaHandle(dev);
        assertEquals(key, m.devGetDpaHandle(dev), "one key while the context runs");
        dpa.stop();
        stopped = true;
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(() -> m.devGetDpaHandle(dev)), "no started DPA context on the device");
        m.destroy();
    }

    /** A copy past the destination map's end is the NIC's error: an error completion with its syndrome, not a hang. */
    @Test
    void aCopyPastTheMapsEndCompletesInError() {
        long src = alloc(8192);
        long dst = hostBuf(8192);
        Report r = copy(ops(4, USER_DATA), 1, MODE_EACH, hostMap(dst, 4096, RW), dst, dpaMap(src, 8192), src, 8192);
        assertEquals(false, r.timedOut());
        assertEquals(1, r.completions().size());
        assertEquals(DocaDpaDevCompletion.COMP_SEND_ERR, r.completions().get(0)[0], "type SEND_ERR");
        assertNotEquals(0, r.completions().get(0)[2], "an error syndrome");
        assertEquals(USER_DATA & 0xffffffffL, r.completions().get(0)[1], "the error completion carries the user data too");
    }

    /** A destination map without write permission: the copy completes in error and not a byte lands. */
    @Test
    void aDestinationWithoutWritePermissionCompletesInErrorAndStaysUntouched() {
        byte[] data = pattern(256, 9);
        long src = alloc(256);
        dpa.h2dMemcpy(src, data);
        long dst = hostBuf(4096);
        Report r = copy(ops(4, USER_DATA), 1, MODE_EACH, hostMap(dst, 4096, DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_ONLY), dst,
                dpaMap(src, 256), src, 256);
        assertEquals(1, r.completions().size());
        assertEquals(DocaDpaDevCompletion.COMP_SEND_ERR, r.completions().get(0)[0], "type SEND_ERR");
        assertNotEquals(0, r.completions().get(0)[2], "an error syndrome");
        assertArrayEquals(new byte[256], hostRead(dst, 256), "nothing written");
    }

    /** A post beyond the queue size (nothing consumed the completions) ends the DPA process with ERROR_QUEUE_FULL; so does a length of 0. */
    @Test
    void aPostPastTheQueueSizeEndsTheProcessWithItsNamedError() {
        long src = alloc(64);
        long dst = alloc(64);
        int s = dpaMap(src, 64);
        int d = dpaMap(dst, 64);
        Ops o = ops(1, USER_DATA);
        long h = o.ops().getDpaHandle();
        dpa.rpc(AsyncProgsStubs.POST_ONE, h, d, dst, s, src, 8L);
        DocaException e = assertThrows(DocaException.class, () -> dpa.rpc(AsyncProgsStubs.POST_ONE, h, d, dst, s, src, 8L));
        assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage());
        assertTrue(e.getMessage().contains(Integer.toHexString(DocaDpaDevAsyncOps.ERROR_QUEUE_FULL)), e.getMessage());
    }

    @Test
    void aCopyOfZeroBytesEndsTheProcessWithItsNamedError() {
        long src = alloc(64);
        int s = dpaMap(src, 64);
        Ops o = ops(4, USER_DATA);
        DocaException e = assertThrows(DocaException.class, () -> dpa.rpc(AsyncProgsStubs.POST_ONE, o.ops().getDpaHandle(), s, src, s, src, 0L));
        assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage());
        assertTrue(e.getMessage().contains(Integer.toHexString(DocaDpaDevAsyncOps.ERROR_BAD_LENGTH)), e.getMessage());
    }

    @Test
    void callsInTheWrongOrderAnswerDocasErrors() {
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> DocaDpaAsyncOps.create(dpa, 0, 0)), "queue size 0");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> DocaDpaAsyncOps.create(null, 4, 0)));
        DocaDpa idle = DocaDpa.create(dev);
        try {
            assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> DocaDpaAsyncOps.create(idle, 4, 0)), "the DPA context is not started");
        } finally {
            idle.destroy();
        }
        DocaDpaAsyncOps a = DocaDpaAsyncOps.create(dpa, 4, 0);
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(a::start), "no completion context attached");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(a::getDpaHandle), "not started");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(a::stop), "not started");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> a.attach(null)));
        Ops o = ops(4, 0);
        a.attach(o.comp());
        a.start();
        assertNotEquals(0, a.getDpaHandle());
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> a.attach(o.comp())), "attached after start");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(a::start), "started twice");
        assertEquals(DocaError.DOCA_ERROR_IN_USE, status(a::destroy), "destroyed while started");
        assertEquals(DocaError.DOCA_ERROR_IN_USE, status(o.comp()::stop), "the completion context stopped under started ops");
        a.stop();
        a.destroy();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(a::destroy), "double destroy");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(a::getDpaHandle), "destroyed");
    }

    /**
     * {@code doca_dpa_dev_mmap_get_external_ptr}: a DPA thread reads a host map's word through the
     * pointer and stores its successor beside it; after the window's write-back the host sees it.
     */
    @Test
    void anExternalPointerReachesHostMemoryThroughTheWindow() {
        assertEquals(42, external(true), "the thread's store, written back through the window");
    }

    /** The mutant: without the window's write-back the store never reaches the host, and the checker names it (C3). */
    @Test
    void anExternalStoreNotWrittenBackIsCaught() {
        assertEquals(0, external(false), "the store stayed in the thread's window cache");
        long deadline = System.nanoTime() + 30_000_000_000L;
        String ps;
        while (!(ps = String.join("\n", lab.dpa())).contains("C3")) {
            assertTrue(System.nanoTime() < deadline, "C3 reported: " + ps);
            Thread.onSpinWait();
        }
        assertTrue(ps.contains("AsyncProgs.extWriter"), ps);
    }

    /** Runs {@code extWriter} on a host word of 41; returns the word the host then sees beside it. */
    private long external(boolean writeback) {
        long buf = hostBuf(4096);
        lab.proc.writeLong(buf + 64, 41);
        int key = hostMap(buf, 4096, RW);
        DocaDpaThread t = DocaDpaThread.create(dpa);
        undo.add(t::destroy);
        long arg = alloc(E_SIZE);
        t.setFuncArg(AsyncProgsStubs.EXT_WRITER, arg);
        t.start();
        DocaSyncEvent done = DocaSyncEvent.create();
        done.addPublisherLocationDpa(dpa);
        done.addSubscriberLocationDpa(dpa);
        done.start();
        undo.add(done::destroy);
        DocaDpaNotificationCompletion notif = DocaDpaNotificationCompletion.create(dpa, t);
        undo.add(notif::destroy);
        notif.start();
        dpa.h2dMemcpy(arg, le(key, buf + 64, done.getDpaHandle(dpa), writeback ? 1 : 0));
        t.run();
        try {
            dpa.rpc(AsyncProgsStubs.NOTIFY, notif.getDpaHandle());
        } catch (DocaException e) {
            // the mutant: the thread the RPC woke may end the process (C3, strict) before the RPC returns
            if (writeback || e.error() != DocaError.DOCA_ERROR_DRIVER || !e.getMessage().contains("process ended")) {
                throw e;
            }
            return lab.proc.readLong(buf + 72);
        }
        done.waitGt(0, -1L, BOUND);
        return lab.proc.readLong(buf + 72);
    }

    /**
     * The memory model sees the posts: a copy made by hand through the ops' layout without the
     * write-back before its doorbell is caught (C1) naming the RPC's line, and the process ends (strict).
     */
    @Test
    void aPostWithoutWritebackBeforeItsDoorbellIsCaught() {
        long src = alloc(64);
        long dst = alloc(64);
        int s = dpaMap(src, 64);
        int d = dpaMap(dst, 64);
        Ops o = ops(4, USER_DATA);
        try {
            dpa.rpc(AsyncProgsStubs.POST_WITHOUT_WRITEBACK, o.ops().getDpaHandle(), d, dst, s, src, 8L);
        } catch (DocaException e) {
            assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage()); // the process may end before the RPC answers
        }
        long deadline = System.nanoTime() + 30_000_000_000L;
        String ps;
        while (!(ps = String.join("\n", lab.dpa())).contains("C1")) {
            assertTrue(System.nanoTime() < deadline, "C1 reported: " + ps);
            Thread.onSpinWait();
        }
        assertTrue(ps.contains("without __dpa_thread_memory_writeback before the doorbell") && ps.contains("AsyncProgs.postWithoutWriteback"), ps);
    }
}
