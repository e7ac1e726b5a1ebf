package org.peerdirect.dpa.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DpaLab;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.LitmusDevStubs;
import org.peerdirect.flexio.FlexioFunc;

/**
 * The memory-model litmus set of scenario 10 (DPA_MODEL.md §3.5) as DOCA kernels: each a launch of
 * two ranks (rank 0 writes, rank 1 reads) on the BlueField-3's DPA as the board runs it
 * (concurrent, strict checks). Message passing with the W→W fence reads 42 and the checker stays
 * silent; without it (the mutant) the checker reports C2 naming the reader, whatever the
 * interleaving (epochs, not timing), and the process ends; same-address order and 8-byte
 * single-copy atomicity hold every round, while a reader of a 16-byte copy's two halves is
 * reported (C2); an unaligned 8-byte store ends the process (C5).
 *
 * <p>The seeded deterministic interleavings, and the 16-byte copy a seed tears with the checker
 * off, are {@code hca-sim}'s {@code MemoryModelTest} on the same programs: a deterministic DPA runs
 * its harts only while its host waits in the model's {@code awaitIdle}, which a DOCA host never
 * calls, so the DOCA level runs the board's concurrent mode, where the checks (epochs, alignment)
 * do not depend on the interleaving. (doca-dpa's {@code DocaDpaLitmusTest} until its kernels moved to
 * dpa-samples' exported {@code LitmusDev}, which itest's {@code DocaScenariosIT} launches too.)
 */
class LitmusTest {

    private static final Duration BOUND = Duration.ofSeconds(60);
    private static final int ROUNDS = 5;

    @TempDir
    Path tmp;
    private DpaLab lab;
    private DocaDev dev;
    private DocaDpa dpa;
    private DocaSyncEvent done;
    private long arg;

    @BeforeEach
    void up() {
        lab = new DpaLab(tmp);
        dev = lab.open(0);
    }

    @AfterEach
    void down() {
        if (dpa != null) {
            close();
        }
        dev.close();
        lab.close();
    }

    private void open() {
        dpa = DocaDpa.create(dev);
        dpa.setApp(LitmusDevStubs.APP);
        dpa.start();
        done = DocaSyncEvent.create();
        done.addPublisherLocationDpa(dpa);
        done.addSubscriberLocationCpu(dev);
        done.start();
        arg = dpa.memAlloc(1024);
        dpa.memset(arg, 0, 1024);
    }

    private void close() {
        done.destroy();
        dpa.stop();
        dpa.destroy();
        dpa = null;
    }

    /** One launch of {@code kernel} with 2 ranks; null when it ended, else the launch's failure (the process ended under it). */
    private DocaException launch(FlexioFunc kernel) {
        long before = done.get();
        dpa.kernelLaunchUpdateSet(null, 0, done, before + 1, 2, kernel, arg);
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (System.nanoTime() < deadline) {
            DocaException f = dpa.kernelFailure();
            if (f != null) {
                return f;
            }
            try {
                done.waitGt(before, -1L, Duration.ofMillis(100));
                return null;
            } catch (DocaException e) {
                assertEquals(DocaError.DOCA_ERROR_TIME_OUT, e.error(), e.getMessage());
            }
        }
        throw new AssertionError(kernel.name() + " neither ended nor failed within " + BOUND);
    }

    private long load(long off) {
        return dpa.rpc(LitmusDevStubs.LOAD64, arg + off);
    }

    @Test
    void messagePassingWithTheFenceReads42AndTheCheckerIsSilent() {
        for (int i = 0; i < ROUNDS; i++) {
            open();
            assertNull(launch(LitmusDevStubs.MP_FENCE));
            assertEquals(42, load(128), "round " + i);
            assertTrue(lab.dpaFindings(0).stream().noneMatch(f -> f.contains("C2")), lab.dpaFindings(0).toString());
            close();
        }
    }

    @Test
    void messagePassingWithoutTheFenceIsC2NamingTheReader() {
        for (int i = 0; i < ROUNDS; i++) {
            open();
            DocaException f = launch(LitmusDevStubs.MP_NO_FENCE);
            assertNotNull(f, "round " + i + ": strict mode ends the process on C2");
            assertEquals(DocaError.DOCA_ERROR_DRIVER, f.error(), f.getMessage());
            List<String> findings = lab.dpaFindings(0);
            assertTrue(findings.stream().anyMatch(l -> l.contains("C2") && l.contains("LitmusDev.mpRead:")), "round " + i + ": " + findings);
            close();
        }
    }

    @Test
    void sameAddressOrderAndEightByteAtomicityHold() {
        open();
        for (int i = 0; i < ROUNDS; i++) {
            assertNull(launch(LitmusDevStubs.SAME_ADDRESS));
            assertEquals(0, load(584), "round " + i + ": a reader never sees one location's stores out of order");
            assertNull(launch(LitmusDevStubs.WORD8));
            assertEquals(0, load(520), "round " + i + ": an aligned 8-byte store never tears");
        }
        assertTrue(lab.dpaFindings(0).stream().noneMatch(f -> f.contains("C2") || f.contains("C5")), lab.dpaFindings(0).toString());
    }

    /**
     * A 16-byte copy is two 8-byte stores: a reader that, having seen the second half written, takes
     * the first without ordering relies on an atomicity the DPA does not give, and strict checking
     * reports it (C2 naming the reading line) every round; the 8-byte word above is never reported.
     */
    @Test
    void readingASixteenByteCopyUnorderedIsReported() {
        for (int i = 0; i < ROUNDS; i++) {
            open();
            DocaException f = launch(LitmusDevStubs.PAIR16);
            assertNotNull(f, "round " + i + ": strict mode ends the process");
            List<String> findings = lab.dpaFindings(0);
            assertTrue(findings.stream().anyMatch(l -> l.contains("C2") && l.contains("LitmusDev.pair16:")), "round " + i + ": " + findings);
            close();
        }
    }

    @Test
    void anUnalignedStoreEndsTheProcessNamingTheLine() {
        open();
        DocaException f = launch(LitmusDevStubs.UNALIGNED);
        assertNotNull(f, "C5 is fatal");
        List<String> crashes = lab.dpaCrashes(0);
        assertTrue(crashes.stream().anyMatch(l -> l.contains("unaligned") && l.contains("LitmusDev.unaligned:")), crashes.toString());
    }
}
