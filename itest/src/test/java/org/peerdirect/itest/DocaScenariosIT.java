package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;
import static org.peerdirect.dpa.samples.dev.PingPongDev.*;
import static org.peerdirect.itest.DocaRun.le;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;


import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.LitmusDevStubs;
import org.peerdirect.dpa.samples.dev.PingPongDevStubs;
import org.peerdirect.kernel.iommu.IommuAudit;

/**
 * DOCA DPA scenarios of DPA_MODEL.md §4 inside Felix, each with its mutant that must fail, on the
 * container's BlueField-3 through the real bundles, with the device programs of dpa-samples'
 * exported {@code dev} package (the same code as dpa-samples' tests, no copy): (7) DOCA's
 * {@code dpa_ping_pong}; (10) DOCA's {@code dpa_nvqual} through {@code dpa:sample nvqual} and its
 * mutant {@code nvqual_fence} (as {@code DpaScenariosIT} runs scenario 2 through {@code dpa:sample echo}),
 * and the memory-model litmus set on {@code LitmusDev}; (9) DOCA's {@code dpa_all_to_all} through
 * {@code dpa:sample all_to_all} over a second BlueField-3 plugged in by Configuration Admin. Each case ends with the clean-up checks of the other DOCA ITs, on the
 * scenario's own objects ({@link DocaRun#close}).
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class DocaScenariosIT extends DocaIt {

    private static final Duration BOUND = Duration.ofSeconds(120);

    // ---------------------------------------------------------------- scenario 7: dpa_ping_pong

    /** One side of the ping-pong: its RDMA context, thread, argument block, received-values array, event. */
    record Side(DocaRdma rdma, DocaDpaThread thread, long arg, long values, DocaSyncEvent ev) {
    }

    /** A side as the sample builds it: thread with TLS, its completion context, DOCA RDMA on the DPA, buffers mapped, its event. */
    static Side side(DocaRun r, boolean ping, boolean noRepost) {
        long values = r.alloc(4L * ITERATIONS);
        long tls = r.alloc(TLS_SIZE);
        r.dpa.h2dMemcpy(tls, le(values, 0, ping ? 1 : 0, noRepost ? 1 : 0));
        long arg = r.alloc(PP_SIZE);
        DocaDpaThread t = DocaDpaThread.create(r.dpa);
        r.undo.add(t::destroy);
        t.setFuncArg(PingPongDevStubs.THREAD_KERNEL, arg);
        t.setLocalStorage(tls);
        t.start();
        DocaDpaCompletion comp = DocaDpaCompletion.create(r.dpa, 16);
        r.undo.add(comp::destroy);
        comp.setThread(t);
        comp.start();
        DocaRdma rdma = DocaRdma.create(r.dev);
        rdma.setPermissions(DocaRun.RW);
        rdma.setDatapathOnDpa(r.dpa);
        rdma.setRecvQueueSize(4);
        rdma.setSendQueueSize(8);
        rdma.dpaCompletionAttach(comp);
        rdma.start();
        r.undo.add(rdma::destroy);
        DocaSyncEvent ev = r.dpaEvent();
        long recv = r.alloc(64);
        long send = r.alloc(64);
        r.dpa.h2dMemcpy(arg, le(comp.getDpaHandle(), rdma.getDpaHandle(), recv, r.dpaMap(recv, 64), 8, send, r.dpaMap(send, 64), 8,
                ev.getDpaHandle(r.dpa), 1));
        return new Side(rdma, t, arg, values, ev);
    }

    /** The two contexts connected, both threads run, the first iteration by RPC. */
    static void connectAndTrigger(DocaRun r, Side ping, Side pong) {
        DocaRdma.Export a = ping.rdma().export();
        DocaRdma.Export b = pong.rdma().export();
        ping.rdma().connect(b.connectionDetails(), a.connection());
        pong.rdma().connect(a.connectionDetails(), b.connection());
        ping.thread().run();
        pong.thread().run();
        r.dpa.rpc(PingPongDevStubs.TRIGGER_FIRST_ITERATION_RPC, ping.arg(), pong.arg());
    }

    /** The values 0..99 a side marked received. */
    static List<Integer> received(DocaRun r, Side s) {
        ByteBuffer v = ByteBuffer.wrap(r.dpa.d2hMemcpy(s.values(), 4 * ITERATIONS)).order(ByteOrder.LITTLE_ENDIAN);
        return IntStream.range(0, ITERATIONS).filter(i -> v.getInt(4 * i) == 1).boxed().toList();
    }

    /** Scenario 7: 100 iterations each way; both arrays [1]*100, both events set, each thread activated once (it polls). */
    @Test
    public void scenario7PingPongHundredIterationsBothArraysBothEvents() throws Exception {
        try (DocaRun r = run("itest-doca-ping-pong", PingPongDevStubs.APP)) {
            Side ping = side(r, true, false);
            Side pong = side(r, false, false);
            connectAndTrigger(r, ping, pong);
            ping.ev().waitGt(0, -1L, BOUND);
            pong.ev().waitGt(0, -1L, BOUND);
            List<Integer> all = IntStream.range(0, ITERATIONS).boxed().toList();
            for (Side s : List.of(ping, pong)) {
                String who = s == ping ? "ping" : "pong";
                assertEquals(who + ": every value 0..99 received once, array [1]*100", all, received(r, s));
                assertEquals(who + ": the event is set", 1, s.ev().get());
                assertEquals(who + ": one activation (the thread polls, never reschedules)", 1, s.thread().activations());
            }
        }
    }

    /** Scenario 7's mutant: pong does not re-post its receive; the exchange stops after the first value, neither event is set. */
    @Test
    public void scenario7MutantWithoutRepostingTheReceiveTheExchangeStops() throws Exception {
        try (DocaRun r = run("itest-doca-ping-pong-mutant", PingPongDevStubs.APP)) {
            Side ping = side(r, true, false);
            Side pong = side(r, false, true);
            connectAndTrigger(r, ping, pong);
            DocaException e = assertThrows(DocaException.class, () -> ping.ev().waitGt(0, -1L, Duration.ofSeconds(3)));
            assertEquals(DocaError.DOCA_ERROR_TIME_OUT, e.error());
            assertEquals("pong's event is not set", 0, pong.ev().get());
            assertEquals("pong got the first value only", List.of(0), received(r, pong));
            assertEquals("ping got pong's answer to it, then nothing", List.of(0), received(r, ping));
        }
    }

    // ---------------------------------------------------------------- scenario 10: dpa_nvqual

    /** No DOCA DPA context, no DPA process left, the audit clean: after a sample, whose process is gone. */
    private void assertNothingLeft() {
        assertTrue("no DOCA DPA context", objects.contexts().stream().noneMatch(c -> c.process().startsWith("dpa_sample_")));
        String ps = run("dpa:ps");
        assertTrue(ps, ps.lines().noneMatch(l -> l.strip().matches("process \\d+ uid .*")));
        IommuAudit audit = iommu.audit();
        assertEquals("no IOMMU fault: " + audit, 0, audit.faults());
        assertTrue(audit.toString(), audit.violationFree());
    }

    /**
     * Scenario 10 ({@code dpa:sample nvqual}, dpa-samples' {@code NvqualDev}): one thread per available
     * EU with strict affinity and TLS, notified by one RPC, each adding 1 to the event the host waits
     * on; every EU but the DPA OS's available, the excluded ones unused, a cycle count per used EU.
     */
    @Test
    public void scenario10NvqualOverEveryAvailableEuWithStrictAffinity() {
        String out = run("dpa:sample nvqual -e 5,17,200");
        assertTrue(out, out.contains("\"total_harts\": 256") && out.contains("\"unreachable_harts\": [1]")
                && out.contains("\"unused_harts\": [5, 17, 200]") && out.contains("qualification passed: 251 EUs"));
        java.util.regex.Matcher used = java.util.regex.Pattern.compile("\"used_harts\": \\[([0-9, ]+)]").matcher(out);
        assertTrue(out, used.find());
        List<Integer> expected = IntStream.range(2, 256).filter(eu -> eu != 5 && eu != 17 && eu != 200).boxed().toList();
        assertEquals(out, expected.toString(), "[" + used.group(1) + "]");
        java.util.regex.Matcher cycles = java.util.regex.Pattern.compile("\"cycles\": \\[([0-9, ]+)]").matcher(out);
        assertTrue(out, cycles.find());
        String[] c = cycles.group(1).split(", ");
        assertEquals(out, 251, c.length);
        for (String v : c) {
            assertTrue("cycles counted on each EU: " + out, Long.parseLong(v) > 0);
        }
        assertNothingLeft();
    }

    /** Scenario 10's mutant ({@code dpa:sample nvqual_fence}): the result not written back fails the qualification, C1 names the store. */
    @Test
    public void scenario10MutantWithoutWritebackFailsAndTheCheckerNamesIt() {
        String out = run("dpa:sample nvqual_fence");
        assertTrue(out, out.contains("\"used_harts\": [2, 3, 16]") && out.contains("qualification failed: EU "));
        assertTrue(out, out.contains("C1") && out.contains("NvqualDev.report:"));
        assertNothingLeft();
    }

    // ---------------------------------------------------------------- scenario 10: the litmus set

    /** One launch of a 2-rank litmus kernel on {@code arg}; null when it ended, else the launch's failure (its process ended). */
    static DocaException launch(DocaRun r, DocaSyncEvent done, org.peerdirect.flexio.FlexioFunc kernel, long arg) {
        long before = done.get();
        r.dpa.kernelLaunchUpdateSet(null, 0, done, before + 1, 2, kernel, arg);
        long deadline = System.nanoTime() + BOUND.toNanos();
        while (System.nanoTime() < deadline) {
            DocaException f = r.dpa.kernelFailure();
            if (f != null) {
                return f;
            }
            try {
                done.waitGt(before, -1L, Duration.ofMillis(100));
                return null;
            } catch (DocaException e) {
                assertEquals(e.getMessage(), DocaError.DOCA_ERROR_TIME_OUT, e.error());
            }
        }
        throw new AssertionError(kernel.name() + " neither ended nor failed within " + BOUND);
    }

    /** A context of the litmus app with its completion event (DPA → CPU) and a zeroed 1 KiB argument; returns the argument. */
    static long litmusArg(DocaRun r, DocaSyncEvent[] done) {
        DocaSyncEvent ev = DocaSyncEvent.create();
        ev.addPublisherLocationDpa(r.dpa);
        ev.addSubscriberLocationCpu(r.dev);
        ev.start();
        r.undo.add(ev::destroy);
        done[0] = ev;
        return r.alloc(1024);
    }

    /** {@code dpa:mm}'s or {@code dpa:crash}'s lines naming {@code check} and {@code site}. */
    long linesWith(String cmd, String check, String site) {
        return run(cmd).lines().filter(l -> l.contains(check) && l.contains(site)).count();
    }

    /**
     * Scenario 10's litmus set (dpa-samples' {@code LitmusDev}, 2-rank kernels on the container's
     * concurrent strict DPA): message passing with the W→W fence reads 42 with no finding; same-address
     * order and 8-byte atomicity hold. Each mutant fails: without the fence C2 names the reader and the
     * process ends; a 16-byte copy read in halves is C2; an unaligned store is C5 naming its line.
     */
    @Test
    public void scenario10LitmusSetFencedHoldsAndEachMutantIsCaught() throws Exception {
        DocaSyncEvent[] done = new DocaSyncEvent[1];
        try (DocaRun r = run("itest-doca-litmus", LitmusDevStubs.APP)) {
            long arg = litmusArg(r, done);
            assertEquals(null, launch(r, done[0], LitmusDevStubs.MP_FENCE, arg));
            assertEquals("the reader saw the data the flag published", 42, r.dpa.rpc(LitmusDevStubs.LOAD64, arg + 128));
            assertEquals(null, launch(r, done[0], LitmusDevStubs.SAME_ADDRESS, arg));
            assertEquals("one location's stores in order", 0, r.dpa.rpc(LitmusDevStubs.LOAD64, arg + 584));
            assertEquals(null, launch(r, done[0], LitmusDevStubs.WORD8, arg));
            assertEquals("an aligned 8-byte store never tears", 0, r.dpa.rpc(LitmusDevStubs.LOAD64, arg + 520));
            assertEquals("no finding on the fenced programs", 0, linesWith("dpa:mm", "C2", "LitmusDev.") + linesWith("dpa:mm", "C5", "LitmusDev."));
        }
        String[][] mutants = {{"MP_NO_FENCE", "dpa:mm", "C2", "LitmusDev.mpRead:"}, {"PAIR16", "dpa:mm", "C2", "LitmusDev.pair16:"},
                {"UNALIGNED", "dpa:crash", "unaligned", "LitmusDev.unaligned:"}};
        for (String[] m : mutants) {
            org.peerdirect.flexio.FlexioFunc kernel = (org.peerdirect.flexio.FlexioFunc) LitmusDevStubs.class.getField(m[0]).get(null);
            try (DocaRun r = run("itest-doca-litmus-" + m[0].toLowerCase(java.util.Locale.ROOT), LitmusDevStubs.APP)) {
                long arg = litmusArg(r, done);
                DocaException f = launch(r, done[0], kernel, arg);
                assertTrue(m[0] + ": strict checking ends the process", f != null);
                assertEquals(f.getMessage(), DocaError.DOCA_ERROR_DRIVER, f.error());
                assertTrue(m[0] + ": " + m[1] + " names " + m[3] + ":\n" + run(m[1]), linesWith(m[1], m[2], m[3]) > 0);
            }
        }
    }

    // ---------------------------------------------------------------- scenario 9: dpa_all_to_all

    /** The container's BlueField-3 count through Configuration Admin (hca-sim's {@code org.peerdirect.hca.cx4}); returns once the verbs devices show it. */
    void bluefield3s(int n, int devicesExpected) throws Exception {
        org.osgi.framework.ServiceReference<org.osgi.service.cm.ConfigurationAdmin> ref = context.getServiceReference(org.osgi.service.cm.ConfigurationAdmin.class);
        org.osgi.service.cm.ConfigurationAdmin cm = context.getService(ref);
        try {
            org.osgi.service.cm.Configuration c = cm.getConfiguration("org.peerdirect.hca.cx4", "?");
            java.util.Hashtable<String, Object> props = new java.util.Hashtable<>();
            if (c.getProperties() != null) {
                java.util.Collections.list(c.getProperties().keys()).forEach(k -> props.put(k, c.getProperties().get(k)));
            }
            props.put("bluefield3", n);
            c.update(props);
        } finally {
            context.ungetService(ref);
        }
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (devices.devices().size() != devicesExpected) {
            assertTrue("the verbs devices with bluefield3=" + n + ": " + devices.devices().size() + ", not " + devicesExpected,
                    System.nanoTime() < deadline);
            java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L); // polling the device list: no event to wait on here
        }
    }

    /**
     * Scenario 9 ({@code dpa:sample all_to_all}, dpa-samples' {@code AllToAllDev}): a second
     * BlueField-3 plugged in through Configuration Admin; 4 ranks over the two, 3 iterations, every
     * receive matrix the exact transpose each time; the mutant (each signal before its write) gets
     * every block that crosses a connection wrong, the diagonal right. Then the second BlueField-3 goes.
     */
    @Test
    public void scenario9AllToAllOverTwoBlueField3sAndItsMutant() throws Exception {
        int before = devices.devices().size();
        bluefield3s(2, before + 1);
        try {
            String out = run("dpa:sample all_to_all -n 3");
            assertTrue(out, out.contains("4 ranks on [") && out.contains(", 2 DPA threads each"));
            for (int i = 1; i <= 3; i++) {
                assertTrue(out, out.contains("iteration " + i + ": every receive matrix is the transpose"));
            }
            assertNothingLeft();
            String mutant = run("dpa:sample all_to_all_unordered -n 1");
            List<String> offDiagonal = new ArrayList<>();
            for (int r = 0; r < 4; r++) {
                for (int i = 0; i < 4; i++) {
                    if (r != i) {
                        offDiagonal.add(r + "<-" + i);
                    }
                }
            }
            assertTrue(mutant, mutant.contains("iteration 1: wrong blocks (rank<-sender) " + offDiagonal));
            assertNothingLeft();
        } finally {
            bluefield3s(1, before);
        }
    }
}
