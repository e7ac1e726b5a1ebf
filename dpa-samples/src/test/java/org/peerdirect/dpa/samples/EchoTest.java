package org.peerdirect.dpa.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.dpa.samples.dev.EchoDevStubs;
import org.peerdirect.flexio.FlexioEventHandler;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.flexio.FlexioQp;
import org.peerdirect.flexio.FlexioStatus;
import org.peerdirect.ib.core.verbs.IbvContext;

/**
 * DPA_MODEL.md §4 scenario 2 on FlexIO, with the echo sample's device code ({@code EchoDev}, built by
 * dpacc with flexio-dev linked) and its host side ({@link EchoSample}): an event handler echoing over
 * an RC QP whose rings, doorbell records and buffers live in the DPA heap, a host peer sending bursts
 * that race the handler's arm: every message comes back upper-cased, in order, with at most one
 * activation per message. The mutants: no memory write-back before the send doorbell (C1, naming the
 * handler's line that called the library's doorbell) and no {@code flexio_dev_cq_arm} before
 * reschedule (C7, the handler never woken again). This was flexio's {@code FlexioEchoTest}, which ran
 * a hand-linked copy of the same handler (flexio's tests cannot use dpacc: dpacc builds on flexio).
 */
class EchoTest {

    static final int N = 32;

    @TempDir
    Path tmp;
    SampleMachine m;
    IbvContext ctx;

    @BeforeEach
    void up() {
        m = new SampleMachine(tmp);
        ctx = m.open();
    }

    @AfterEach
    void down() {
        ctx.close();
        m.close();
    }

    /** The handler {@code func} on its queues, connected to a host QP and run; the test's body gets the process, the handler and its context. */
    interface Body {
        void run(FlexioProcess p, EchoSample.Host h, FlexioEventHandler handler, long context);
    }

    void echo(FlexioFunc func, Body body) {
        try (EchoSample.Undo undo = new EchoSample.Undo()) {
            EchoSample.Host h = EchoSample.host(ctx, undo);
            FlexioProcess p = FlexioProcess.create(ctx, EchoDevStubs.APP, RpcSample.ATTR);
            undo.push(p::destroy);
            FlexioEventHandler[] eh = new FlexioEventHandler[1];
            FlexioQp[] qp = new FlexioQp[1];
            long c = EchoSample.DpaSide.build(p, func, eh, qp);
            EchoSample.connect(ctx, qp[0], h);
            eh[0].run();
            body.run(p, h, eh[0], c);
        }
    }

    @Test
    void theHandlerEchoesEveryMessageOfBurstsRacingItsArm() {
        echo(EchoDevStubs.ECHO_HANDLER, (p, h, eh, c) -> {
            for (int first = 0; first < N; first += EchoSample.BURST) {
                String[] echoes = EchoSample.burst(h, first, EchoSample.BURST, 30_000_000_000L);
                assertEquals(EchoSample.BURST, echoes.length, "every echo of the burst from " + first + " came back; " + p.crashData());
                for (int i = 0; i < EchoSample.BURST; i++) {
                    assertEquals(EchoSample.message(first + i).toUpperCase(), echoes[i], "echo " + (first + i) + " in order");
                }
            }
            // the last echo can reach the host before its activation stored the count and rescheduled
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (p.call(EchoDevStubs.ECHO_COUNT, c) < N) {
                assertTrue(System.nanoTime() < deadline, "echo_count reached " + N + " within 30 s");
                LockSupport.parkNanos(1_000_000); // a poll's back-off, not a synchronisation
            }
            int activations = eh.activations();
            assertTrue(activations >= 1 && activations <= N, "activations " + activations + " of " + N + " messages");
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet(), p.crashData());
        });
    }

    @Test
    void aHandlerWithoutWritebackBeforeTheDoorbellIsCaughtNamingItsLine() {
        echo(EchoDevStubs.ECHO_NO_WRITEBACK, (p, h, eh, c) -> {
            String[] echoes = EchoSample.burst(h, 0, 1, 3_000_000_000L);
            assertEquals(0, echoes.length, "no echo leaves a process the memory model ended");
            assertEquals(FlexioStatus.ERR_FATAL_ERROR, p.errStatusGet());
            String ps = String.join("\n", m.dpa());
            // the site is the innermost frame of image code, with flexio-dev linked into the image the library's
            // doorbell (FlexioDev.outbox), and the handler's line that called the library
            assertTrue(ps.contains("C1") && ps.contains("without __dpa_thread_memory_writeback before the doorbell")
                    && ps.contains("org.peerdirect.flexio.dev.FlexioDev.outbox:")
                    && ps.contains("(called from org.peerdirect.dpa.samples.dev.EchoDev."), ps);
        });
    }

    /**
     * The mutant without {@code flexio_dev_cq_arm}: the CQ armed at creation wakes the handler for
     * the first message, which is echoed; the handler reschedules with its CQ not armed: C7, naming
     * the CQ's state (strict mode ends the process), and the next message is never echoed.
     */
    @Test
    void aHandlerThatDoesNotArmItsCqIsNotWokenAgain() {
        echo(EchoDevStubs.ECHO_NO_ARM, (p, h, eh, c) -> {
            assertEquals(List.of("MSG-0-ECHO"), List.of(EchoSample.burst(h, 0, 1, 30_000_000_000L)), "the first message wakes it");
            long deadline = System.nanoTime() + 20_000_000_000L;
            String t;
            while (!(t = String.join("\n", m.bf3.dpaThreads())).contains("PROCESS_ENDED")) { // strict: C7 ends the process
                assertTrue(System.nanoTime() < deadline, t);
                Thread.onSpinWait();
            }
            assertTrue(t.contains("echo_no_arm") && t.contains("not armed"), "dpa:threads shows the CQ not armed: " + t);
            String ps = String.join("\n", m.dpa());
            assertTrue(ps.contains("C7") && ps.contains("flexio_dev_cq_arm before reschedule"), ps);
            assertEquals(FlexioStatus.ERR_FATAL_ERROR, p.errStatusGet(), "strict mode: the lost wake-up ends the process");
            assertEquals(0, EchoSample.burst(h, 1, 1, 2_000_000_000L).length, "the second never comes back");
            assertEquals(1, eh.activations());
        });
    }
}
