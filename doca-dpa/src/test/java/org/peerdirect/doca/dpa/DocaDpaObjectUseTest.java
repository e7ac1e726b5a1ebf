package org.peerdirect.doca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.progs.KernelProgs;
import org.peerdirect.doca.dpa.progs.KernelProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * Check C8 at the DOCA level ("All DOCA DPA objects are non-thread-safe", DOCA DPA Comms): a
 * kernel of two ranks busy-polls completion contexts with {@code doca_dpa_dev_get_completion}
 * until the host stops it. Both ranks on one context (the mutant) is C8 naming the polling line
 * (strict: the process ends; warn: counted, the kernel runs to its end); one context per rank is
 * silent however long they poll side by side.
 *
 * <p>Real concurrency (the board's mode; a DOCA host cannot step a deterministic DPA): the ranks
 * meet at a barrier, then poll until the host sees the finding (or, silent case, until both have
 * polled {@value #POLLS} times together), so nothing hangs on timing and no sleep orders anything.
 * The forced overlap for every seed is hca-sim's {@code ObjectUseTest}.
 */
class DocaDpaObjectUseTest {

    private static final Duration BOUND = Duration.ofSeconds(60);
    private static final int POLLS = 2000;

    @TempDir
    Path tmp;
    private DpaLab lab;
    private DocaDev dev;
    private DocaDpa dpa;
    private DocaSyncEvent done;
    private long block;
    private final List<DocaDpaThread> threads = new ArrayList<>();
    private final List<DocaDpaCompletion> comps = new ArrayList<>();

    @BeforeEach
    void up() {
        lab = new DpaLab(tmp);
        dev = lab.open(0);
    }

    @AfterEach
    void down() {
        if (dpa != null) {
            comps.forEach(DocaDpaCompletion::destroy);
            threads.forEach(DocaDpaThread::destroy);
            done.destroy();
            dpa.stop();
            dpa.destroy();
        }
        dev.close();
        lab.close();
    }

    /** The context in checker {@code mode}, {@code n} completion contexts (each with its started, never run, thread), the block with the ranks' handles. */
    private void open(String mode, int n, boolean shared) {
        lab.models.get(0).dpaCheckMode(mode);
        dpa = DocaDpa.create(dev);
        dpa.setApp(KernelProgsStubs.APP);
        dpa.start();
        done = DocaSyncEvent.create();
        done.addPublisherLocationDpa(dpa);
        done.addSubscriberLocationCpu(dev);
        done.start();
        for (int i = 0; i < n; i++) {
            DocaDpaThread t = DocaDpaThread.create(dpa);
            t.setFuncArg(KernelProgsStubs.EU_WORKER, 0);
            t.start();
            threads.add(t);
            DocaDpaCompletion c = DocaDpaCompletion.create(dpa, 4);
            c.setThread(t);
            c.start();
            comps.add(c);
        }
        block = dpa.memAlloc(KernelProgs.POLL_SIZE);
        ByteBuffer b = ByteBuffer.allocate(KernelProgs.POLL_SIZE).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(KernelProgs.POLL_HANDLES, comps.get(0).getDpaHandle());
        b.putLong(KernelProgs.POLL_HANDLES + 8, comps.get(shared ? 0 : 1).getDpaHandle());
        dpa.h2dMemcpy(block, b.array());
    }

    /** Waits (on the completion event, 100 ms at a time) until {@code until} holds or the launch failed; the launch's failure or null. */
    private DocaException await(BooleanSupplier until, String what) {
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (System.nanoTime() < deadline) {
            DocaException f = dpa.kernelFailure();
            if (f != null || until.getAsBoolean()) {
                return f;
            }
            try {
                done.waitGt(0, -1L, Duration.ofMillis(100));
            } catch (DocaException e) {
                assertEquals(DocaError.DOCA_ERROR_TIME_OUT, e.error(), e.getMessage());
            }
        }
        throw new AssertionError(what + " not within " + BOUND + ": " + lab.models.get(0).dpaFindings());
    }

    private boolean c8() {
        return lab.models.get(0).dpaFindings().stream().anyMatch(l -> l.contains("C8"));
    }

    private long polls(int rank) {
        return dpa.rpc(KernelProgsStubs.LOAD64, block + KernelProgs.POLL_COUNTS + 8L * rank);
    }

    /** The host's stop word, then the kernel's end (the completion event at 1). */
    private void stop() {
        dpa.memset(block + KernelProgs.POLL_STOP, 1, 8);
        assertNull(await(() -> done.get() >= 1, "the kernel's end"), "the kernel ends");
    }

    @Test
    void twoRanksPollingOneCompletionContextIsC8AndStrictEndsTheProcess() {
        open("strict", 1, true);
        dpa.kernelLaunchUpdateSet(null, 0, done, 1, 2, KernelProgsStubs.POLL_COMPLETION, block);
        DocaException f = await(() -> false, "the process's end");
        assertNotNull(f);
        assertEquals(DocaError.DOCA_ERROR_DRIVER, f.error(), f.getMessage());
        List<String> crashes = lab.models.get(0).dpaCrashes();
        assertTrue(crashes.stream().anyMatch(l -> l.contains("C8") && l.contains("KernelProgs.pollCompletion:")
                && l.contains("DocaDpaDevCompletion.getCompletion:")), crashes.toString());
        assertTrue(c8(), lab.models.get(0).dpaFindings().toString());
    }

    @Test
    void warnCountsC8AndTheKernelRunsToItsEnd() {
        open("warn", 1, true);
        dpa.kernelLaunchUpdateSet(null, 0, done, 1, 2, KernelProgsStubs.POLL_COMPLETION, block);
        assertNull(await(this::c8, "a C8 finding"), "warn does not end the process");
        stop();
        List<String> findings = lab.models.get(0).dpaFindings();
        assertTrue(findings.stream().anyMatch(l -> l.contains("C8") && l.contains("KernelProgs.pollCompletion:")
                && l.contains("0x" + Long.toHexString(comps.get(0).getDpaHandle()))), findings.toString());
        assertTrue(findings.stream().allMatch(l -> !l.matches("\\s*C[1-7] .*")), "only C8: " + findings);
    }

    @Test
    void oneCompletionContextPerRankIsSilent() {
        open("strict", 2, false);
        dpa.kernelLaunchUpdateSet(null, 0, done, 1, 2, KernelProgsStubs.POLL_COMPLETION, block);
        assertNull(await(() -> polls(0) >= POLLS && polls(1) >= POLLS, "both ranks' polls"), "no finding ends the process");
        stop();
        assertTrue(!c8(), lab.models.get(0).dpaFindings().toString());
        assertTrue(lab.models.get(0).dpaCrashes().stream().allMatch(l -> l.startsWith("no DPA process")), lab.models.get(0).dpaCrashes().toString());
    }
}
