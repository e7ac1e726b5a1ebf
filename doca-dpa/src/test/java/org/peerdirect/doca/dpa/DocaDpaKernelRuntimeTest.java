package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevKernel.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.progs.KernelProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.flexio.FlexioEventHandler;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.flexio.FlexioProcess;

/**
 * The DPA half of a kernel launch on the data path (doca-dpa-dev's {@code DocaDpaDevKernel}, the
 * runtime entries dpacc links into a DOCA DPA image): a pool of rank threads made once, then each
 * launch is the control block's words written by the host's copy path and one call of the start
 * RPC; each rank calls the kernel through its launch trampoline ({@code Dpa.call}), counts itself
 * ended, and the last rank moves the completion event (DPA memory, the DPA's own atomic; the
 * {@code KernelDispatcher} leaves that word 0 and moves the event itself). Driven here directly,
 * below {@link DocaDpa}'s launches, for its rules: no firmware command per launch, every rank ran
 * with its rank and count, the completion event moves only after the last rank ended.
 */
class DocaDpaKernelRuntimeTest {

    private static final Duration BOUND = Duration.ofSeconds(60);

    @TempDir
    Path tmp;
    private DpaLab lab;
    private DocaDev dev;
    private DocaDpa dpa;
    private DocaSyncEvent done;
    private final List<FlexioEventHandler> ranks = new ArrayList<>();

    @BeforeEach
    void up() {
        lab = new DpaLab(tmp);
        dev = lab.open(0);
        dpa = DocaDpa.create(dev);
        dpa.setApp(KernelProgsStubs.APP);
        dpa.start();
        done = DocaSyncEvent.create();
        done.addPublisherLocationDpa(dpa);
        done.addSubscriberLocationDpa(dpa);
        done.start();
    }

    @AfterEach
    void down() {
        ranks.forEach(FlexioEventHandler::destroy);
        done.destroy();
        dpa.stop();
        dpa.destroy();
        assertEquals(List.of(), lab.dpa().stream().filter(l -> !l.startsWith("eu")).toList(), "no DPA process left");
        dev.close();
        lab.close();
    }

    private long load(long daddr) {
        return dpa.rpc(KernelProgsStubs.LOAD64, daddr);
    }

    private long zeroed(int bytes) {
        long d = dpa.memAlloc(bytes);
        dpa.memset(d, 0, bytes);
        return d;
    }

    /** A pool of {@code n} rank threads on a control block; the block's launch words for {@code kernel} on {@code arg}; its address. */
    private long pool(int n, FlexioFunc kernel, long arg) {
        FlexioProcess p = dpa.flexioProcess();
        long ctl = zeroed(controlSize(n));
        long blocks = zeroed(n * DocaDpaDev.RANK_BLOCK_SIZE);
        ByteBuffer b = ByteBuffer.allocate(n * DocaDpaDev.RANK_BLOCK_SIZE).order(ByteOrder.LITTLE_ENDIAN);
        for (int r = 0; r < n; r++) {
            b.putInt(r * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_RANK, r);
            b.putLong(r * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_LOG_STREAM, dpa.logStream());
        }
        dpa.h2dMemcpy(blocks, b.array());
        ByteBuffer c = ByteBuffer.allocate(controlSize(n)).order(ByteOrder.LITTLE_ENDIAN);
        int index = p.symbolIndex(kernel.name() + LAUNCH_SUFFIX);
        assertTrue(index >= 0, "dpacc linked " + kernel.name() + "'s launch trampoline");
        c.putLong(C_KERNEL, index).putLong(C_ARG, arg).putLong(C_NTHREADS, n).putLong(C_COMP, done.getDpaHandle(dpa))
                .putLong(C_COMP_VALUE, 1).putLong(C_COMP_ADD, 1).putLong(C_RANK_BLOCKS, blocks);
        for (int r = 0; r < n; r++) {
            FlexioEventHandler h = FlexioEventHandler.createRuntime(p, RANK_SYMBOL, ctl, blocks + (long) r * DocaDpaDev.RANK_BLOCK_SIZE);
            ranks.add(h);
            h.run();
            c.putLong(C_THREADS + 8 * r, h.id());
        }
        dpa.h2dMemcpy(ctl, c.array());
        return ctl;
    }

    @Test
    void launchesAfterThePoolIsMadeRunNoFirmwareCommandAndEveryRankRuns() {
        int n = 4;
        long rec = zeroed(1024);
        long ctl = pool(n, KernelProgsStubs.HELLO_WORLD, rec);
        FlexioProcess p = dpa.flexioProcess();
        assertEquals(n, p.callRuntime(START_SYMBOL, ctl), "the first launch makes the RPC channel");
        done.waitGt(0, -1L, BOUND);
        long commands = lab.models.get(0).commandsExecuted();
        long queries = p.rpcStatusQueries();
        int launches = 5;
        for (int k = 2; k <= launches; k++) {
            assertEquals(n, p.callRuntime(START_SYMBOL, ctl));
            done.waitGt(k - 1, -1L, BOUND);
            assertEquals(k, done.get(), "update_add of 1 per launch, by the last rank");
            assertEquals((long) n * k, load(rec), "every rank of launch " + k + " ended before the completion event moved");
        }
        assertEquals(p.rpcStatusQueries() - queries, lab.models.get(0).commandsExecuted() - commands,
                "the only firmware commands during launches are the RPC's status queries of slow answers");
        assertEquals((long) n * launches, load(rec + 8), "each rank ran once per launch");
        for (int r = 0; r < n; r++) {
            assertEquals(n * 1000L + r + 1, load(rec + 16 + 8L * r), "rank " + r + " saw its rank and num_threads");
        }
        assertEquals(launches, load(ctl + C_FINISHED), "the finished count follows the completion event");
    }

    @Test
    void theCompletionEventWaitsForTheLastRank() {
        int n = 3;
        long rec = zeroed(1024);
        long ctl = pool(n, KernelProgsStubs.GATED, rec);
        dpa.flexioProcess().callRuntime(START_SYMBOL, ctl);
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (load(rec + 8) < n) { // every rank running, held at its gate
            assertTrue(System.nanoTime() < deadline, "the ranks did not all start within " + BOUND);
        }
        for (int i = 0; i < 20; i++) {
            assertEquals(0, done.get(), "the completion event moved while every rank still runs");
            assertEquals(0, load(rec), "no rank ended before the gate opened");
        }
        dpa.h2dMemcpy(rec + 512, new byte[] {1, 0, 0, 0, 0, 0, 0, 0});
        done.waitGt(0, -1L, BOUND);
        assertEquals(n, load(rec), "every rank ended");
        assertEquals(1, load(ctl + C_FINISHED));
    }
}
