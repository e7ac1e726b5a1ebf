package org.peerdirect.hca.cx4;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;
import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.CommandFuzzTest.Page;
import org.peerdirect.hca.cx4.CommandFuzzTest.Spec;
import org.peerdirect.hca.cx4.DpaWireTest.Proc;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.dpa.progs.RtosProgs;

/**
 * The BlueField-3 firmware's duties around the DPA objects: their contexts in the firmware's pages
 * (more pages while they live, back at destroy) and a process error told to the host as an
 * {@code OBJECT_CHANGE} EQE naming the process. Driven through {@link DpaWireTest}'s command
 * helpers; each test ends with no DPA object, context or EU left and the rig's audit.
 */
class DpaFirmwareTest {

    static final int PROCESSES = 5;

    @TempDir
    Path tmp;
    final DpaWireTest w = new DpaWireTest();

    @AfterEach
    void down() {
        w.down();
    }

    FirmwareDpa start() {
        w.tmp = tmp;
        w.rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        return w.dpa();
    }

    /** {@link #start} with page requests on (the rig's level 5): a command short of pages is parked until the harness gives them. */
    FirmwareDpa startWithPageRequests() {
        w.rig = new CommandFuzzTest.Rig(new CommandFuzzTest.Stats("dpafw"), tmp.resolve("swap"), (byte) 0x5a, ConnectX4Device.DEVICE_BLUEFIELD3);
        w.rig.giveWhenParked = false; // pages only by request, as mlx5_core gives them: no unsolicited 16 under load
        w.rig.bringUp(5);
        return w.dpa();
    }

    /**
     * Serves the firmware's page requests until none is outstanding ({@code QUERY_PAGES} regular:
     * 0) and none waits on the EQ; returns the pages it holds then. The rig answers requests
     * lazily (when a command waits), so without this the pages held at a given moment depend on
     * the timing: a request to give idle pages back, or for more, may be pending. Settled, the
     * firmware holds what its water marks call for: free context space of at least
     * {@link FirmwarePages#LOW_WATER} pages and at most {@link FirmwarePages#SURPLUS} idle
     * regular pages.
     */
    int settledPagesHeld() {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (true) {
            w.rig.servePageRequests();
            CommandFuzzTest.Outcome q = w.rig.ok(DpaWireTest.cmd(Mlx5Cmd.QUERY_PAGES, Pages.QUERY_REGULAR, 0, 16, 16));
            if (q.outHeader().get(BE32, Pages.QUERY_OUT_NUM_PAGES) == 0 && w.rig.servePageRequests() == 0) {
                return w.rig.dev.pagesHeld();
            }
            assertTrue(System.nanoTime() < deadline, "the firmware's page requests settle within 10 s: " + w.rig.dev.describe());
        }
    }

    /**
     * Each process takes a firmware page for its context, each thread 512 bytes, the others 64:
     * with five processes and their threads live the firmware asked for (and holds) more pages
     * (page requests, commands parked until the driver answered), and every context goes back
     * when the objects go. The pages held are compared settled ({@link #settledPagesHeld}), with
     * 16 unasked pages given first as a loaded machine's rig did: deterministic on every timing.
     */
    @Test
    void dpaObjectContextsLiveInTheFirmwarePages() {
        FirmwareDpa dpa = startWithPageRequests();
        int a = w.createUctx();
        int uar = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        // what a loaded machine does: a command that waits past 200 ms makes the rig give 16 pages unasked (giveWhenParked),
        // idle pages the contexts could take without asking; unsettled, the count compared depended on that timing
        w.rig.harness(w.rig.give(CommandFuzzTest.SLOT_GIVE, w.rig.fresh(16)));
        int units = w.rig.dev.firmwareContextUnits();
        int held = settledPagesHeld(); // the 16 went back (the firmware asked): at most SURPLUS idle
        long requests = w.rig.stats.pageRequests.sum();
        List<Proc> procs = new ArrayList<>();
        List<Integer> threads = new ArrayList<>();
        for (int i = 0; i < PROCESSES; i++) {
            Proc p = w.process(a, pd, uar, RtosProgs.class, "count");
            procs.add(p);
            threads.add(w.thread(a, p));
        }
        assertEquals(4 * PROCESSES, dpa.contexts(), "memory, process, outbox and thread of each process");
        assertEquals(units + PROCESSES * (64 + 8 + 1 + 1), w.rig.dev.firmwareContextUnits(),
                "a page per process, 512 B per thread, 64 B per memory and outbox");
        // settled, the firmware held at most SURPLUS (4) idle pages: five whole-page contexts needed a page it did not hold
        int after = settledPagesHeld();
        assertTrue(after > held, "the firmware asked for (and holds) more pages: " + held + " -> " + after);
        assertTrue(64 * after >= w.rig.dev.firmwareContextUnits(), "the contexts are in pages it holds");
        assertTrue(w.rig.stats.pageRequests.sum() > requests, "by page requests the driver answered while the objects were created");
        for (int i = 0; i < PROCESSES; i++) {
            w.destroyObj(OBJ_DPA_THREAD, a, threads.get(i));
            w.destroyProcess(a, procs.get(i));
        }
        assertEquals(0, dpa.contexts());
        assertEquals(units, w.rig.dev.firmwareContextUnits(), "every DPA context went back");
        assertEquals(List.of(), dpa.leaks());
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_PD, a, pd));
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_UAR, a, uar));
        w.destroyUctx(a);
    }

    /**
     * {@code flexio_dev_error(0x85)}: the process ends with that status, and the host learns it
     * at once by an {@code OBJECT_CHANGE} EQE (obj_type DPA_PROCESS, obj_id the process) on the EQ
     * that asked for the event (the one {@code mlx5_core} hands to DevX's event channels); the
     * query shows the status.
     */
    @Test
    void aProcessErrorReachesTheHostAsAnObjectChangeEvent() {
        start();
        int a = w.createUctx();
        int uar = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Page ring = w.rig.page();
        for (int i = 0; i < 64; i++) {
            ring.mem().set(JAVA_BYTE, i * 64L + Eq.EQE_OWNER, (byte) 1);
        }
        Spec eq = new Spec(DpaWireTest.SLOT, Mlx5Cmd.CREATE_EQ, 0, (int) Eq.CREATE_EQ_IN_PAS + 8, 16);
        Eq.EQC_LOG_EQ_SIZE.set(eq.inSeg(), Eq.CREATE_EQ_IN_EQC, 6);
        Eq.EQC_UAR_PAGE.set(eq.inSeg(), Eq.CREATE_EQ_IN_EQC, w.rig.uars.get(0));
        eq.inSeg().set(BE64, Eq.CREATE_EQ_IN_EVENT_BITMASK, 1L << Eq.EVENT_OBJECT_CHANGE);
        eq.inSeg().set(BE64, Eq.CREATE_EQ_IN_PAS, ring.iova());
        int eqn = w.index(eq);
        Proc proc = w.process(a, pd, uar, RtosProgs.class, "userError");
        int tid = w.thread(a, proc);
        w.arg(proc, 0, 0x85);
        w.threadState(a, tid, THREAD_STATE_RUN);
        w.threadState(a, tid, THREAD_STATE_TRIGGER);
        DpaWireTest.await(() -> (ring.mem().get(JAVA_BYTE, Eq.EQE_OWNER) & 1) == 0 ? 1 : 0, 1, "the OBJECT_CHANGE EQE");
        assertEquals(Eq.EVENT_OBJECT_CHANGE, ring.mem().get(JAVA_BYTE, Eq.EQE_TYPE) & 0xff);
        assertEquals(OBJ_DPA_PROCESS, ring.mem().get(BE16, Eq.EQE_DATA + Eq.OBJ_CHANGE_TYPE) & 0xffff, "it names the type");
        assertEquals(proc.pid(), ring.mem().get(BE32, Eq.EQE_DATA + Eq.OBJ_CHANGE_ID), "and the process");
        assertEquals(0x85, PROCESS_STATUS.get(w.query(OBJ_DPA_PROCESS, a, proc.pid()), 0), "the query gives the user's status");
        assertTrue(w.unit().awaitIdle());
        assertEquals(1, ring.mem().get(JAVA_BYTE, 64 + Eq.EQE_OWNER) & 1, "one event, not more (the next EQE as software left it)");
        w.destroyObj(OBJ_DPA_THREAD, a, tid);
        w.destroyProcess(a, proc);
        w.rig.ok(w.destroy(Mlx5Cmd.DESTROY_EQ, 0, eqn));
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_PD, a, pd));
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_UAR, a, uar));
        w.destroyUctx(a);
    }
}
