package org.peerdirect.itest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.peerdirect.dpa.samples.dev.InitiatorTargetDev.*;
import static org.peerdirect.itest.DocaRun.le;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;


import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaNotificationCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.InitiatorTargetDevStubs;

/**
 * DOCA RDMA with its data path on the DPA inside Felix (DPA_MODEL.md §4 scenario 6, DOCA's
 * {@code dpa_initiator_target}): on the container's BlueField-3, an initiator and a target DOCA RDMA
 * context joined by two connections, the target's feeding one completion context; thread 1 takes
 * the four receives (values 1..4, immediates 10..13, user data = connection id), thread 2 sets the
 * event to 10 while the host waits > 9; everything destroyed with {@link DocaRun}'s checks (no context of
 * the process, nothing pinned, no DPA process, the IOMMU audit clean).
 * The device code is dpa-samples' {@code InitiatorTargetDev} (the sample's own); its mutant switch
 * leaves out {@code request_notification}: thread 1 runs once, C7.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class DocaRdmaIT extends DocaIt {

    private static DocaRdma rdma(DocaRun r, DocaDpaCompletion comp) {
        DocaRdma x = DocaRdma.create(r.dev);
        x.setPermissions(DocaRun.RW);
        x.setDatapathOnDpa(r.dpa);
        x.setMaxNumConnections(2);
        if (comp != null) {
            x.dpaCompletionAttach(comp);
        }
        x.start();
        r.undo.add(x::destroy);
        return x;
    }

    @Test
    public void theInitiatorTargetSampleRunsOnTheContainersBlueField3() {
        scenario6(false);
    }

    /**
     * Scenario 6's mutant: thread 1 acknowledges but does not request notification before it
     * reschedules. No further completion triggers it: it runs once, the checker reports the lost
     * wake-up (C7, strict: the process ends), the event is never set; nothing is left afterwards.
     */
    @Test
    public void withoutRequestNotificationThread1RunsOnceOnly() {
        scenario6(true);
    }

    private void scenario6(boolean mutant) {
        try (DocaRun r = run(mutant ? "itest-doca-rdma-mutant" : "itest-doca-rdma", InitiatorTargetDevStubs.APP)) {
            DocaDpa dpa = r.dpa;
            DocaRdma initiator = rdma(r, null);
            long a1 = r.alloc(T1_SIZE);
            DocaDpaThread t1 = DocaDpaThread.create(dpa);
            r.undo.add(t1::destroy);
            t1.setFuncArg(InitiatorTargetDevStubs.THREAD1_KERNEL, a1);
            t1.start();
            DocaDpaCompletion comp = DocaDpaCompletion.create(dpa, 4);
            r.undo.add(comp::destroy);
            comp.setThread(t1);
            comp.start();
            DocaRdma target = rdma(r, comp);
            for (int i = 0; i < 2; i++) {
                DocaRdma.Export ie = initiator.export();
                DocaRdma.Export te = target.export();
                initiator.connect(te.connectionDetails(), ie.connection());
                target.connect(ie.connectionDetails(), te.connection());
            }
            t1.run();
            DocaSyncEvent ev = r.dpaEvent();
            long a2 = r.alloc(T2_SIZE);
            dpa.h2dMemcpy(a2, le(ev.getDpaHandle(dpa), 10));
            DocaDpaThread t2 = DocaDpaThread.create(dpa);
            r.undo.add(t2::destroy);
            t2.setFuncArg(InitiatorTargetDevStubs.THREAD2_KERNEL, a2);
            t2.start();
            DocaDpaNotificationCompletion note = DocaDpaNotificationCompletion.create(dpa, t2);
            note.start();
            r.undo.add(note::destroy);
            t2.run();
            long recv = r.alloc(64);
            long send = r.alloc(64);
            dpa.h2dMemcpy(send, le(1, 2, 3, 4));
            int recvKey = r.dpaMap(recv, 64);
            int sendKey = r.dpaMap(send, 64);
            dpa.h2dMemcpy(a1, le(0, note.getDpaHandle(), comp.getDpaHandle(), target.getDpaHandle(), recv, recvKey, 8));
            dpa.h2dMemcpy(a1 + T1_MUTANT_NO_REQUEST, le(mutant ? 1 : 0));
            dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_RECEIVE_RPC, 0L, target.getDpaHandle(), recv, recvKey, 8L);
            if (mutant) {
                mutantRunsOnce(dpa, initiator, send, sendKey, t1, ev);
            } else {
                sampleRuns(dpa, initiator, send, sendKey, a1, t1, t2, ev);
            }
        }
    }

    /** The mutant's first receive runs thread 1; its second never does: C7 reported, one activation, no event. */
    private void mutantRunsOnce(DocaDpa dpa, DocaRdma initiator, long send, int sendKey, DocaDpaThread t1, DocaSyncEvent ev) {
        dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_SEND_IMM_RPC, 0L, initiator.getDpaHandle(), 0, send, sendKey, 8L, 10);
        try {
            dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_SEND_IMM_RPC, 0L, initiator.getDpaHandle(), 1, send + 8, sendKey, 8L, 11);
        } catch (org.peerdirect.doca.DocaException e) { // thread 1's reschedule may have ended the process (strict C7) before this RPC
            assertEquals(e.getMessage(), org.peerdirect.doca.DocaError.DOCA_ERROR_DRIVER, e.error());
        }
        long deadline = System.nanoTime() + 60_000_000_000L;
        String seen;
        while (!(seen = run("dpa:ps") + run("dpa:mm")).contains("C7")) {
            assertTrue("C7 reported:\n" + seen, System.nanoTime() < deadline);
            java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L); // polling the bench's report: no event to wait on
        }
        assertTrue(seen, seen.contains("not armed"));
        assertEquals("thread 1 ran once only", 1, t1.activations());
        org.peerdirect.doca.DocaException e = org.junit.Assert.assertThrows(org.peerdirect.doca.DocaException.class,
                () -> ev.waitGt(9, -1L, Duration.ofMillis(300)));
        assertTrue("the event is never set: " + e.getMessage(), e.error() == org.peerdirect.doca.DocaError.DOCA_ERROR_TIME_OUT
                || e.error() == org.peerdirect.doca.DocaError.DOCA_ERROR_DRIVER || e.error() == org.peerdirect.doca.DocaError.DOCA_ERROR_BAD_STATE);
    }

    /** The sample's four sends: the event set to 10, each value and immediate once, user data the connection, 4 + 1 activations. */
    private void sampleRuns(DocaDpa dpa, DocaRdma initiator, long send, int sendKey, long a1, DocaDpaThread t1, DocaDpaThread t2, DocaSyncEvent ev) {
        for (int i = 0; i < 4; i++) {
            dpa.rpc(InitiatorTargetDevStubs.RDMA_POST_SEND_IMM_RPC, 0L, initiator.getDpaHandle(), i % 2, send + 8L * i, sendKey, 8L, 10 + i);
        }
        ev.waitGt(9, -1L, Duration.ofSeconds(60));
        assertEquals(10, ev.get());
        ByteBuffer b = ByteBuffer.wrap(dpa.d2hMemcpy(a1, T1_SIZE)).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals("four receives", 4, b.getLong(T1_NUM_RECEIVE));
        for (int v = 0; v < 4; v++) {
            assertEquals("value " + (v + 1) + " received", 1, b.getInt(T1_RECEIVED_VALUES + 4 * v));
        }
        long imms = 0;
        long values = 0;
        for (int n = 0; n < 4; n++) {
            long imm = b.getLong(T1_RECORD + 32 * n + 8);
            long value = b.getLong(T1_RECORD + 32 * n + 24);
            assertEquals("receive " + n + ": value " + value + " came with immediate " + (9 + value), 9 + value, imm);
            assertEquals("receive " + n + ": user data is the connection id of immediate " + imm, (imm - 10) % 2, b.getLong(T1_RECORD + 32 * n + 16));
            imms |= 1L << imm;
            values |= 1L << value;
        }
        assertEquals("immediates 10..13", 0xfL << 10, imms);
        assertEquals("values 1..4 each once", 0x1eL, values);
        assertEquals(4, t1.activations());
        assertEquals(1, t2.activations());
    }
}
