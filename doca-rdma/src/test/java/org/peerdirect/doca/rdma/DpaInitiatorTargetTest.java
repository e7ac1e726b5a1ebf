package org.peerdirect.doca.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.doca.rdma.progs.RdmaProgs.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaNotificationCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.dpa.DpaLabFixture;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.rdma.progs.RdmaProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * DPA_MODEL.md §4 scenario 6, DOCA's {@code dpa_initiator_target} sample: an initiator DOCA RDMA
 * context and a target one, both with their data path on the DPA, joined by two connections; the
 * target's two connections feed one completion context whose thread (thread 1) takes one receive
 * per activation; after the 4th it notifies thread 2 by a notification completion, which sets a
 * sync event to 10 while the host waits for it to pass 9. The receive buffers and the sent values
 * live in DPA memory (maps of DPA memory ranges; a host-memory map has no DPA handle here yet).
 * The mutant thread 1 does not request notification: it runs once only.
 */
class DpaInitiatorTargetTest extends DpaLabFixture {

    private static final Duration BOUND = Duration.ofSeconds(60);
    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_ATOMIC;

    DpaInitiatorTargetTest() {
        super(RdmaProgsStubs.APP);
    }

    private DocaRdma rdma(DocaDpaCompletion comp) {
        DocaRdma r = DocaRdma.create(dev);
        r.setPermissions(RW);
        r.setDatapathOnDpa(dpa);
        r.setMaxNumConnections(2);
        r.setRecvQueueSize(4);
        r.setSendQueueSize(8);
        if (comp != null) {
            r.dpaCompletionAttach(comp);
        }
        r.start();
        undo.add(r::destroy);
        return r;
    }

    /** A map of {@code len} bytes of DPA memory at {@code daddr}; its DPA handle. */
    private int dpaMap(long daddr, long len) {
        return dpaMmap(dpa, dev, daddr, len, RW).devGetDpaHandle(dev);
    }

    private long[] words(long daddr, int n) {
        ByteBuffer b = ByteBuffer.wrap(dpa.d2hMemcpy(daddr, 8 * n)).order(ByteOrder.LITTLE_ENDIAN);
        long[] w = new long[n];
        for (int i = 0; i < n; i++) {
            w[i] = b.getLong();
        }
        return w;
    }

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }

    /** The sample's objects; returns thread 1's argument block. */
    private record Sample(DocaRdma initiator, DocaRdma target, DocaDpaThread t1, DocaDpaThread t2, DocaSyncEvent ev, long a1, long a2,
            long sendBuf, int sendMmap, long recvBuf, int recvMmap) {
    }

    private Sample build(boolean requestNotification) {
        DocaRdma initiator = rdma(null);
        long a1 = alloc(T1_SIZE);
        DocaDpaThread t1 = DocaDpaThread.create(dpa);
        undo.add(t1::destroy);
        t1.setFuncArg(RdmaProgsStubs.THREAD1, a1);
        t1.start();
        DocaDpaCompletion comp = DocaDpaCompletion.create(dpa, 4);
        undo.add(comp::destroy);
        comp.setThread(t1);
        comp.start();
        DocaRdma target = rdma(comp);
        List<DocaRdma.Export> ie = List.of(initiator.export(), initiator.export());
        List<DocaRdma.Export> te = List.of(target.export(), target.export());
        for (int i = 0; i < 2; i++) {
            initiator.connect(te.get(i).connectionDetails(), ie.get(i).connection());
            target.connect(ie.get(i).connectionDetails(), te.get(i).connection());
        }
        t1.run();

        DocaSyncEvent ev = DocaSyncEvent.create();
        ev.addPublisherLocationDpa(dpa);
        ev.addSubscriberLocationDpa(dpa);
        ev.start();
        undo.add(ev::destroy);
        long a2 = alloc(T2_SIZE);
        dpa.h2dMemcpy(a2, le(ev.getDpaHandle(dpa), 10, 0));
        DocaDpaThread t2 = DocaDpaThread.create(dpa);
        undo.add(t2::destroy);
        t2.setFuncArg(RdmaProgsStubs.THREAD2, a2);
        t2.start();
        DocaDpaNotificationCompletion note = DocaDpaNotificationCompletion.create(dpa, t2);
        note.start();
        undo.add(() -> {
            note.stop();
            note.destroy();
        });
        t2.run();

        long recvBuf = alloc(64);
        int recvMmap = dpaMap(recvBuf, 64);
        long sendBuf = alloc(64);
        dpa.h2dMemcpy(sendBuf, le(1, 2, 3, 4));
        int sendMmap = dpaMap(sendBuf, 64);
        dpa.h2dMemcpy(a1, le(comp.getDpaHandle(), note.getDpaHandle(), target.getDpaHandle(), recvMmap, recvBuf, 8, requestNotification ? 1 : 0));
        dpa.rpc(RdmaProgsStubs.POST_RECEIVE, target.getDpaHandle(), recvBuf, recvMmap, 8L);
        return new Sample(initiator, target, t1, t2, ev, a1, a2, sendBuf, sendMmap, recvBuf, recvMmap);
    }

    private void send(Sample s, int i) {
        dpa.rpc(RdmaProgsStubs.POST_SEND_IMM, s.initiator().getDpaHandle(), i % 2, s.sendBuf() + 8L * i, s.sendMmap(), 8L, 10 + i);
    }

    @Test
    void twoConnectionsFeedOneCompletionContextAndThread2SetsTheEvent() {
        Sample s = build(true);
        for (int i = 0; i < EXPECTED; i++) {
            send(s, i);
        }
        s.ev().waitGt(9, -1L, BOUND);
        assertEquals(10, s.ev().get(), "thread 2 set the event to 10");
        long[] values = words(s.a1() + T1_VALUES, EXPECTED);
        long[] log = words(s.a1() + T1_LOG, 4 * EXPECTED);
        assertEquals("[1, 1, 1, 1]", java.util.Arrays.toString(values), "each value 1..4 received once; (type, imm, user data, value) per receive: "
                + java.util.Arrays.toString(log));
        Set<Long> imms = new HashSet<>();
        for (int n = 0; n < EXPECTED; n++) {
            long type = log[4 * n], imm = log[4 * n + 1], user = log[4 * n + 2], value = log[4 * n + 3];
            assertEquals(DocaDpaDevCompletion.COMP_RECV_SEND_IMM, type, "receive " + n + " is a SEND with immediate");
            assertEquals(9 + value, imm, "receive " + n + ": value " + value + " came with immediate " + (9 + value));
            int conn = (int) ((value - 1) % 2);
            assertEquals(s.target().connections().get(conn).getId(), user, "receive " + n + ": user data is the target connection's id");
            imms.add(imm);
        }
        assertEquals(Set.of(10L, 11L, 12L, 13L), imms, "immediates 10..13");
        assertEquals(EXPECTED, words(s.a1() + T1_NUM, 1)[0]);
        assertEquals(EXPECTED, s.t1().activations(), "thread 1 ran once per receive and finished after the 4th");
        assertEquals(1, words(s.a2() + T2_RUNS, 1)[0], "thread 2 ran once");
        assertEquals(1, s.t2().activations());
        assertTrue(lab.dpa().stream().noneMatch(l -> l.contains("C7") || l.contains("C1")), "no memory-model finding: " + lab.dpa());
    }

    /**
     * The mutant: thread 1 acknowledges but does not request notification before rescheduling.
     * DOCA: without it the completion context is not notified of new completions, so thread 1
     * runs once. The checker calls the reschedule a lost wake-up (C7: its CQ is not armed), which
     * in strict mode ends the process; either way the second receive never runs thread 1 and the
     * event is never set.
     */
    @Test
    void withoutRequestNotificationThread1RunsOnceOnly() {
        Sample s = build(false);
        for (int i = 0; i < 2; i++) {
            try {
                send(s, i);
            } catch (DocaException e) { // thread 1's reschedule may end the process (strict C7) before an RPC answers, the first one's too
                assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage());
            }
        }
        long deadline = System.nanoTime() + BOUND.toNanos();
        String ps;
        while (!(ps = String.join("\n", lab.dpa())).contains("C7")) {
            assertTrue(System.nanoTime() < deadline, "C7 reported: " + ps);
            Thread.onSpinWait();
        }
        assertTrue(ps.contains("thread1") && ps.contains("not armed"), ps);
        assertEquals(1, s.t1().activations(), "thread 1 ran once only");
        DocaException e = assertThrows(DocaException.class, () -> s.ev().waitGt(9, -1L, Duration.ofMillis(300)));
        assertTrue(e.error() == DocaError.DOCA_ERROR_TIME_OUT || e.error() == DocaError.DOCA_ERROR_DRIVER
                || e.error() == DocaError.DOCA_ERROR_BAD_STATE, "the event is never set: " + e.getMessage());
    }
}
