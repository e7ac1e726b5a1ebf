package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.progs.EuProgsStubs;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * DOCA DPA's resource queries read from the device's DPA capability block (through FlexIO's
 * {@code mlx5dv_devx_general_cmd}), the launch bound they set, thread groups (ranks and size on
 * the device, the calls' order), and issue 43's bad input not covered by the thread and launch
 * tests: each the {@code doca_error_t} DOCA documents, nothing left behind (the lab's checks).
 */
class DocaDpaResourcesTest extends DpaLabFixture {

    private static final Duration BOUND = Duration.ofSeconds(60);

    private DocaSyncEvent ev;

    DocaDpaResourcesTest() {
        super(EuProgsStubs.APP);
    }

    @BeforeEach
    void up() {
        ev = dpaEvent(); // destroyed by the fixture's teardown before it stops the DPA context
    }

    private static void refused(DocaError want, Executable call, String what) {
        DocaException e = assertThrows(DocaException.class, call, what);
        assertEquals(want, e.error(), what + ": " + e.getMessage());
    }

    @Test
    void resourceQueriesAreTheCapabilityBlocks() {
        Map<String, Long> caps = lab.models.get(0).dpaCapValues();
        int harts = 1 << caps.get("log_max_harts_per_partition");
        int perCore = 1 << caps.get("log_harts_per_core");
        assertEquals(harts, dpa.getTotalNumEusAvailable(), "the partition's EUs (the bound of EU ids, as dpa_nvqual uses it)");
        assertEquals(256, harts, "BlueField-3: 16 cores × 16 EUs");
        assertEquals(16, dpa.getNumEusPerCore());
        assertEquals(harts / perCore, dpa.getCoreNum());
        assertEquals(harts - caps.get("os_reserved_harts"), dpa.getMaxThreadsPerKernel(), "the user's EUs");
        assertEquals(120, dpa.getKernelMaxRunTime(), "DOCA's samples size work to 0.75 × 120 s");

        assertTrue(DocaDpa.capIsSupported(dev.asDevinfo()), "a BlueField-3's devinfo");
        DocaDev cx6 = lab.open(1);
        assertFalse(DocaDpaCaps.capIsSupported(cx6.asDevinfo()), "a ConnectX-6 Dx reports no DPA block");
        refused(DocaError.DOCA_ERROR_NOT_SUPPORTED, () -> DocaDpa.create(cx6), "a DPA context on a ConnectX-6 Dx");
        cx6.close();
    }

    /** A launch of the most threads a kernel may have runs every rank; one more is refused and nothing is queued. */
    @Test
    void aLaunchMayHaveAtMostMaxThreadsPerKernel() {
        int max = dpa.getMaxThreadsPerKernel();
        long counter = dpa.memAlloc(8);
        dpa.memset(counter, 0, 8);
        DocaException e = assertThrows(DocaException.class,
                () -> dpa.kernelLaunchUpdateSet(null, 0, ev, 1, max + 1, EuProgsStubs.COUNT, counter));
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, e.error());
        assertTrue(e.getMessage().contains("nthreads " + (max + 1)) && e.getMessage().contains(max + " threads"), e.getMessage());
        assertEquals(0, dpa.kernelsPending());

        dpa.kernelLaunchUpdateSet(null, 0, ev, 7, max, EuProgsStubs.COUNT, counter);
        ev.waitGt(6, -1L, BOUND);
        assertEquals(max, dpa.rpc(EuProgsStubs.LOAD64, counter), "every rank ran");
        dpa.memFree(counter);
    }

    @Test
    void aThreadGroupGivesEachMemberItsRankAndTheGroupsSize() {
        int n = 4;
        long storage = dpa.memAlloc(16L * n);
        dpa.memset(storage, 0xff, 16L * n);
        refused(DocaError.DOCA_ERROR_INVALID_VALUE, () -> DocaDpaThreadGroup.create(dpa, 0), "an empty group");
        DocaDpaThreadGroup g = DocaDpaThreadGroup.create(dpa, n);
        assertEquals(n, g.getNumThreads());
        List<DocaDpaThread> threads = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            DocaDpaThread t = DocaDpaThread.create(dpa);
            t.setFuncArg(EuProgsStubs.GROUP_MEMBER, ev.getDpaHandle(dpa));
            t.setLocalStorage(storage + 16L * i);
            threads.add(t);
        }
        refused(DocaError.DOCA_ERROR_INVALID_VALUE, () -> g.setThread(threads.get(0), n), "rank n");
        refused(DocaError.DOCA_ERROR_INVALID_VALUE, () -> g.setThread(threads.get(0), -1), "rank -1");
        // ranks in reverse creation order: the rank is the group's, not the creation's
        for (int i = 0; i < n - 1; i++) {
            g.setThread(threads.get(i), n - 1 - i);
        }
        refused(DocaError.DOCA_ERROR_ALREADY_EXIST, () -> g.setThread(threads.get(n - 1), 1), "rank 1 is taken");
        refused(DocaError.DOCA_ERROR_ALREADY_EXIST, () -> g.setThread(threads.get(0), 0), "the thread has a rank");
        refused(DocaError.DOCA_ERROR_BAD_STATE, g::start, "rank 0 has no thread");
        g.setThread(threads.get(n - 1), 0);
        refused(DocaError.DOCA_ERROR_BAD_STATE, g::start, "members not started");
        long[] handles = new long[n];
        List<DocaDpaNotificationCompletion> notes = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            threads.get(i).start();
            refused(DocaError.DOCA_ERROR_BAD_STATE, threads.get(i)::run, "a member runs only once its group started");
            DocaDpaNotificationCompletion c = DocaDpaNotificationCompletion.create(dpa, threads.get(i));
            c.start();
            handles[i] = c.getDpaHandle();
            notes.add(c);
        }
        g.start();
        refused(DocaError.DOCA_ERROR_BAD_STATE, () -> g.setThread(threads.get(0), 1), "set_thread after start");
        threads.forEach(DocaDpaThread::run);
        long hs = dpa.memAlloc(8L * n);
        dpa.h2dMemcpy(hs, le(handles));
        dpa.rpc(EuProgsStubs.ENTRY_POINT, hs, n);
        ev.waitGt(n - 1, -1L, BOUND);
        for (int i = 0; i < n; i++) {
            assertEquals(n - 1 - i, dpa.rpc(EuProgsStubs.LOAD64, storage + 16L * i), "thread " + i + "'s doca_dpa_dev_thread_rank");
            assertEquals(n, dpa.rpc(EuProgsStubs.LOAD64, storage + 16L * i + 8), "thread " + i + "'s doca_dpa_dev_num_threads");
        }

        refused(DocaError.DOCA_ERROR_BAD_STATE, g::destroy, "destroy while started");
        g.stop();
        g.destroy();
        refused(DocaError.DOCA_ERROR_INVALID_VALUE, g::destroy, "double destroy");
        refused(DocaError.DOCA_ERROR_INVALID_VALUE, g::getNumThreads, "a destroyed group");
        notes.forEach(c -> {
            c.stop();
            c.destroy();
        });
        threads.forEach(DocaDpaThread::destroy);
        dpa.memFree(hs);
        dpa.memFree(storage);
    }

    /**
     * Issue 43's bad input: a DPA handle of an mmap for a device not in it (NOT_FOUND); a DPA waiting
     * on an event it does not subscribe to gets no handle (INVALID_VALUE with no DPA location,
     * NOT_SUPPORTED for a DPA publisher of a host counter); destroying a context whose thread runs
     * (IN_USE, as stop), then in order it goes.
     */
    @Test
    void badInputOfIssue43() {
        DocaDev cx6 = lab.open(1);
        long va = lab.proc.mmap(4096);
        lab.proc.populate(va, 4096, true);
        DocaMmap m = DocaMmap.create();
        m.setMemrange(va, 4096);
        m.addDev(dev);
        m.start();
        refused(DocaError.DOCA_ERROR_NOT_FOUND, () -> m.devGetDpaHandle(cx6), "an mmap handle of another device");
        m.destroy();
        cx6.close();

        DocaSyncEvent cpuOnly = DocaSyncEvent.create();
        cpuOnly.addPublisherLocationCpu(dev);
        cpuOnly.addSubscriberLocationCpu(dev);
        cpuOnly.start();
        refused(DocaError.DOCA_ERROR_INVALID_VALUE, () -> cpuOnly.getDpaHandle(dpa), "an event with no DPA location");
        cpuOnly.destroy();
        DocaSyncEvent toHost = DocaSyncEvent.create();
        toHost.addPublisherLocationDpa(dpa);
        toHost.addSubscriberLocationCpu(dev);
        toHost.start();
        toHost.getDpaHandle(dpa); // a DPA publisher of a counter the host subscribes to: reached through the window (DocaDpaHostEventTest)
        toHost.stop();
        refused(DocaError.DOCA_ERROR_BAD_STATE, () -> toHost.getDpaHandle(dpa), "a stopped event's DPA handle");
        toHost.destroy();

        DocaDpaThread t = DocaDpaThread.create(dpa);
        t.setFuncArg(EuProgsStubs.GROUP_MEMBER, ev.getDpaHandle(dpa));
        t.start();
        t.run();
        refused(DocaError.DOCA_ERROR_IN_USE, dpa::destroy, "destroy of a started context with a live thread");
        refused(DocaError.DOCA_ERROR_IN_USE, dpa::stop, "stop with a live thread");
        t.destroy();
        refused(DocaError.DOCA_ERROR_INVALID_VALUE, t::destroy, "double destroy");
    }

    private static byte[] le(long[] v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }
}
