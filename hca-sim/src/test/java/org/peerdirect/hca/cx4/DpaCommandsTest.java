package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.nio.file.Path;
import java.util.BitSet;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.DpaWireTest.Proc;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.dpa.ProcessStatus;
import org.peerdirect.hca.dpa.progs.RtosProgs;

/**
 * The silicon-side Gogo commands through {@link DpaCommands} over a BlueField-3 driven by
 * commands: {@code dpa:eus} (each EU's partition, groups, state and the thread it runs),
 * {@code dpa:threads} (state, EU, activations, triggers latched, CQs), {@code dpa:mm} (findings
 * per process with the handler line) and {@code dpa:crash} (status, failing thread, its line).
 */
class DpaCommandsTest {

    @TempDir
    Path tmp;
    final DpaWireTest w = new DpaWireTest();
    DpaCommands dpa;

    @AfterEach
    void down() {
        w.down();
    }

    /** The rig's BlueField-3, its DPA concurrent and without the cycle watchdog (a spinning handler stays on its EU). */
    FirmwareDpa start() {
        w.tmp = tmp;
        w.rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        dpa = new DpaCommands(() -> Map.of("0000:05:00.0", w.rig.dev));
        FirmwareDpa d = w.rig.dev.dpa();
        d.configure(org.peerdirect.hca.dpa.DpaConfig.test(8, 1).concurrent().withWatchdog(Long.MAX_VALUE),
                org.peerdirect.hca.dpa.LoaderPolicy.isaOnly());
        return d;
    }

    /**
     * A spinning handler holds an EU: {@code dpa:eus} shows the two OS EUs reserved, that EU busy
     * running it (with the group it is in), the others free; {@code dpa:threads} shows it RUNNING
     * there, one activation and one trigger latched (a second trigger while it ran); once it
     * finished, the EU is free again and the thread FINISHED.
     */
    @Test
    void eusAndThreadsShowWhatRunsWhere() {
        start();
        assertTrue(dpa.eus().contains("no DPA object yet"), dpa.eus());
        int a = w.createUctx();
        int uar = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Proc proc = w.process(a, pd, uar, RtosProgs.class, "spin");
        BitSet g = new BitSet();
        g.set(2, 4);
        w.unit().defineGroup(7, g);
        int tid = w.thread(a, proc);
        w.arg(proc, 0, 0);
        w.threadState(a, tid, THREAD_STATE_RUN);
        w.threadState(a, tid, THREAD_STATE_TRIGGER);
        DpaWireTest.await(() -> THREAD_EU.get(w.query(OBJ_DPA_THREAD, a, tid), 0) == 0xffff ? 0 : 1, 1, "the handler on an EU");
        w.threadState(a, tid, THREAD_STATE_TRIGGER); // latched: it runs
        int eu = THREAD_EU.get(w.query(OBJ_DPA_THREAD, a, tid), 0);
        String eus = dpa.eus();
        List<String> lines = eus.lines().toList();
        assertTrue(lines.get(0).contains("BlueField-3 DPA"), eus);
        assertTrue(lines.stream().anyMatch(l -> l.matches("\\s+0\\s+0\\s+-\\s+reserved.*")), "EU 0 is the DPA OS's: " + eus);
        assertTrue(lines.stream().anyMatch(l -> l.matches("\\s+" + eu + "\\s+0\\s+\\S+\\s+busy\\s+1\\s+spin#" + tid + " of process " + proc.pid())),
                "EU " + eu + " runs the handler: " + eus);
        assertTrue(lines.stream().anyMatch(l -> l.matches("\\s+3\\s+0\\s+\\[7\\]\\s+(free|busy).*")), "EU 3 is in group 7: " + eus);
        String threads = dpa.threads();
        assertTrue(threads.contains("thread " + tid + " spin process " + proc.pid() + " RUNNING eu " + eu + " activations 1 latched 1"), threads);
        w.arg(proc, 1, 0); // the spin ends
        assertTrue(w.unit().awaitIdle());
        assertTrue(dpa.eus().lines().anyMatch(l -> l.matches("\\s+" + eu + "\\s+0\\s+\\S+\\s+free\\s+1\\s+-")), dpa.eus());
        assertTrue(dpa.threads().contains("thread " + tid + " spin process " + proc.pid() + " FINISHED eu -"), dpa.threads());
        assertEquals("0000:05:00.0  BlueField-3 DPA\n  no DPA process ended with an error", dpa.crash());
        w.destroyObj(OBJ_DPA_THREAD, a, tid);
        w.destroyProcess(a, proc);
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_PD, a, pd));
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_UAR, a, uar));
        w.destroyUctx(a);
    }

    /**
     * A handler stores a flag and finishes without writing it back; the host's read of it is the
     * memory model's C1: {@code dpa:mm} lists it under the process with the handler's store line,
     * and {@code dpa:crash} shows the process ended (0x07, fatal) by that thread at that line. A
     * second process traps (division by zero): its crash names the thread and the trapping line.
     */
    @Test
    void mmAndCrashNameTheHandlersLine() {
        start();
        assertTrue(dpa.mm().contains("no DPA object yet"), dpa.mm());
        int a = w.createUctx();
        int uar = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Proc flag = w.process(a, pd, uar, RtosProgs.class, "setFlag");
        int t1 = w.thread(a, flag);
        w.threadState(a, t1, THREAD_STATE_RUN);
        w.threadState(a, t1, THREAD_STATE_TRIGGER);
        assertTrue(w.unit().awaitIdle());
        assertTrue(dpa.mm().contains("no memory-model finding"), dpa.mm());
        w.fetch(flag, 0); // the NIC fetches what the handler never wrote back
        String mm = dpa.mm();
        assertTrue(mm.contains("process " + flag.pid() + ": 1 finding(s)"), mm);
        assertTrue(mm.contains("C1 thread " + t1 + " at org.peerdirect.hca.dpa.progs.RtosProgs.setFlag:"), mm);
        Proc trap = w.process(a, pd, uar, RtosProgs.class, "trap");
        int t2 = w.thread(a, trap);
        w.arg(trap, 0, 0);
        w.threadState(a, t2, THREAD_STATE_RUN);
        w.threadState(a, t2, THREAD_STATE_TRIGGER);
        DpaWireTest.await(() -> w.unit().processStatus(trap.pid()) == 0 ? 0 : 1, 1, "the trap ends the process");
        assertTrue(w.unit().awaitIdle());
        String crash = dpa.crash();
        assertTrue(crash.contains(String.format("process %d uid %d status 0x%02x (fatal error) thread %d at org.peerdirect.hca.dpa.progs.RtosProgs.setFlag:",
                flag.pid(), a, ProcessStatus.MEMORY_MODEL, t1)), crash);
        assertTrue(crash.contains(String.format("process %d uid %d status 0x%02x (fatal error) thread %d at org.peerdirect.hca.dpa.progs.RtosProgs.trap:",
                trap.pid(), a, ProcessStatus.HANDLER_TRAP, t2)) && crash.contains("ArithmeticException"), crash);
        for (Proc p : List.of(flag, trap)) {
            w.destroyObj(OBJ_DPA_THREAD, a, p == flag ? t1 : t2);
            w.destroyProcess(a, p);
        }
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_PD, a, pd));
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_UAR, a, uar));
        w.destroyUctx(a);
    }
}
