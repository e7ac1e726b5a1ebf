package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;
import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.CommandFuzzTest.Spec;
import org.peerdirect.hca.cx4.DpaWireTest.Proc;
import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.hca.dpa.DpaNic;

/**
 * Queues in DPA memory (DPA_MODEL.md §4 scenario 2 at the hca-sim level): a CQ bound to a DPA
 * thread and an RC QP whose rings and doorbell records are all in the process DUMEM
 * ({@code cq_umem_id}, {@code wq_umem_id}, {@code dbr_umem_id} naming it). The NIC writes CQEs
 * into DPA memory, the handler ({@link DpaQueueProgs#echo}) polls them with {@code Dpa.ld*},
 * puts SEND WQEs there, writes back and rings {@code SXD_DB} with the producer index, and the
 * NIC fetches the WQEs from DPA memory. A host QP sends bursts that race the handler's arm; every
 * message comes back, in order, none lost, and the memory model finds nothing. Driven through
 * {@link DpaWireTest}'s command helpers.
 */
class DpaQueueTest {

    static final int BURSTS = 6;
    static final int BURST = 8;
    static final long HEAP = 0x8000;

    @TempDir
    Path tmp;
    final DpaWireTest w = new DpaWireTest();

    @AfterEach
    void down() {
        w.down();
    }

    /** One message; the handler's memory-model mistake ({@code check} at {@code site}) ends the process, the host's SEND completes alone. */
    void oneMessageEndsTheProcess(DpaWireTest.Loop host, Proc proc, String check, String site, String says) {
        host.receive(host.lkey, DpaWireTest.Loop.BUF + 0x1000, 64);
        MemorySegment msg = MemorySegment.ofArray("not echoed".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        host.put(0x2000, msg, 0, msg.byteSize());
        host.put(Wqe.OP_SEND, 0, 0, DpaWireTest.Loop.BUF + 0x2000, msg.byteSize(), 0, 0);
        host.ring();
        assertEquals(Cq.CQE_REQ, host.awaitCqe("the SEND"), "the host's SEND completes");
        DpaWireTest.await(() -> w.unit().processStatus(proc.pid()) == 0 ? 0 : 1, 1, "the process ends");
        assertTrue(w.unit().awaitIdle());
        List<org.peerdirect.hca.dpa.Finding> f = w.unit().findings();
        assertTrue(!f.isEmpty() && f.get(0).check().equals(check) && f.get(0).site().contains(site), check + " at " + site + ": " + f);
        assertTrue(f.get(0).message().contains(says), f.get(0).message());
        assertEquals(0, host.get(0x1000), "no echo reached the host's receive buffer");
    }

    /** CREATE_QP: RC, rings at {@link DpaQueueProgs#WQ} of the DUMEM, record at {@link DpaQueueProgs#DBR} + 64, both CQs {@code cqn}. */
    Spec dumemQp(int uid, int uar, int pd, int dumem, int cqn) {
        Spec qp = w.rig.createQp(DpaWireTest.SLOT, Qp.ST_RC, DpaQueueProgs.LOG_QUEUE, DpaQueueProgs.LOG_QUEUE, 2, uar, pd, cqn, cqn, new long[0]);
        qp.onOk = null;
        qp.inlen = (int) Qp.CREATE_QP_IN_PAS;
        Devx.UID.set(qp.inSeg(), 0, uid);
        Devx.QP_WQ_UMEM_VALID.set(qp.inSeg(), 0, 1);
        qp.inSeg().set(BE32, Devx.QP_WQ_UMEM_ID, dumem);
        qp.inSeg().set(BE64, Devx.QP_WQ_UMEM_OFFSET, DpaQueueProgs.WQ);
        Devx.QPC_DBR_UMEM_VALID.set(qp.inSeg(), Qp.IN_QPC, 1);
        Devx.QPC_DBR_UMEM_ID.set(qp.inSeg(), Qp.IN_QPC, dumem);
        qp.inSeg().set(BE64, Qp.IN_QPC + Qp.QPC_DBR_ADDR, DpaQueueProgs.DBR + 64);
        return qp;
    }

    @Test
    void aHandlerEchoesOverAnRcQpWhoseRingsAreAllInDpaMemory() {
        echo("echo", BURSTS);
    }

    /**
     * The same handler without {@code __dpa_thread_memory_writeback} before {@code SXD_DB}: the
     * NIC fetches the SEND WQE from DPA memory and sees the bytes as they were written back (the
     * memory model's rule: DPA → NIC is not coherent). C1 names the handler's store, and in strict
     * mode the process ends; no echo reaches the host.
     */
    @Test
    void aSendWqeNotWrittenBackBeforeTheDoorbellIsAFinding() {
        echo("echoWithoutWriteback", 0);
    }

    /**
     * The handler posts its receives without {@code __dpa_thread_memory_fence(W, W)} between the
     * WQE and the doorbell record: when the NIC takes a receive WQE from DPA memory after reading
     * the record, C6 names the record's store (the NIC might see the record before the WQE), and
     * in strict mode the process ends; no echo.
     */
    @Test
    void aReceiveWqeNotFencedBeforeItsRecordIsAFinding() {
        echo("echoWithoutFence", -1);
    }

    /**
     * The host polling a flag the handler is writing (the tests' {@code word}) is a poll, not a
     * doorbell-ordered fetch: while the word is still dirty in the EU's write buffer the poll reads
     * the old bytes, and no finding is made (CI: the echo tests' poll of READY landed between the
     * handler's store and its write-back, C1 ended the process and READY never came). After the
     * write-back the poll sees it.
     */
    @Test
    void aHostPollingAWordTheDpaIsWritingIsNotAFinding() {
        w.tmp = tmp;
        w.rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        w.dpa();
        int a = w.createUctx();
        int uar = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Proc proc = w.process(a, pd, uar, DpaQueueProgs.class, "storeThenWait", HEAP);
        int tid = w.thread(a, proc);
        w.threadState(a, tid, THREAD_STATE_RUN);
        w.threadState(a, tid, THREAD_STATE_TRIGGER);
        DpaWireTest.await(() -> w.word(proc, DpaQueueProgs.ACTIVATIONS), 1, "the handler stored READY and waits");
        assertEquals(0, w.word(proc, DpaQueueProgs.READY), "still in the EU's write buffer: the poll reads the old bytes");
        assertEquals(List.of(), w.unit().findings(), "a poll is not a fetch the doorbell ordered");
        w.unit().nicWrite(proc.heap() + DpaQueueProgs.BASE, MemorySegment.ofArray(new long[] {1}), 0, 8); // go
        DpaWireTest.await(() -> w.word(proc, DpaQueueProgs.READY), 1, "written back: the poll sees it");
        assertTrue(w.unit().awaitIdle());
        assertEquals(0, w.unit().processStatus(proc.pid()));
        w.destroyObj(OBJ_DPA_THREAD, a, tid);
        w.destroyProcess(a, proc);
    }

    /**
     * Sets up the echo server with handler {@code entry}, sends {@code bursts} bursts (0: one
     * message, expected to end the process with C1; -1: with C6), tears everything down.
     */
    void echo(String entry, int bursts) {
        w.tmp = tmp;
        w.rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        FirmwareDpa dpa = w.dpa();
        int a = w.createUctx();
        int uar = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = w.index(DpaWireTest.cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Proc proc = w.process(a, pd, uar, DpaQueueProgs.class, entry, HEAP);
        int dumem = PROCESS_DUMEM_ID.get(w.query(OBJ_DPA_PROCESS, a, proc.pid()), 0);
        int key = w.dumemMkey(a, pd, dumem, 0, proc.heap(), HEAP);
        int tid = w.thread(a, proc);
        int cqn = w.index(w.umemCq(a, uar, dumem, DpaQueueProgs.CQ, DpaQueueProgs.DBR, tid));
        int qpn = w.index(dumemQp(a, uar, pd, dumem, cqn));
        try (DpaWireTest.Loop host = w.new Loop(a, pd, uar, false)) {
            host.connect(qpn);
            w.connect(a, qpn, host.qpn);
            // the argument block, by RDMA through the DUMEM mkey
            MemorySegment args = MemorySegment.ofArray(new long[12]);
            long[] words = {proc.outbox(), cqn, qpn, key, 0, 0, 0, 0, 0, 0, proc.heap(), 0};
            for (int i = 0; i < words.length; i++) {
                args.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, words[i]);
            }
            assertEquals(Cq.CQE_REQ, host.write(args, key, proc.heap()), "the argument block written into the heap");
            w.threadState(a, tid, THREAD_STATE_RUN);
            w.threadState(a, tid, THREAD_STATE_TRIGGER); // first activation: the setup, then the CQ armed
            DpaWireTest.await(() -> w.word(proc, DpaQueueProgs.READY), 1, "the handler's setup");
            assertTrue(w.unit().awaitIdle());
            assertTrue(dpa.cqState(cqn).armed(), "the handler armed its CQ: " + dpa.cqState(cqn));
            if (bursts == 0) {
                oneMessageEndsTheProcess(host, proc, "C1", "DpaQueueProgs.echoOne", "without __dpa_thread_memory_writeback");
            } else if (bursts < 0) {
                oneMessageEndsTheProcess(host, proc, "C6", "DpaQueueProgs.postReceive", "__dpa_thread_memory_fence(W, W) missing");
            }
            int n = 0;
            for (int b = 0; b < bursts; b++) {
                List<String> sent = new ArrayList<>();
                for (int i = 0; i < BURST; i++) {
                    host.receive(host.lkey, DpaWireTest.Loop.BUF + 0x1000 + i * 64L, 64);
                }
                for (int i = 0; i < BURST; i++, n++) {
                    String m = String.format("echo %03d from the host, burst %d", n, b);
                    sent.add(m);
                    MemorySegment msg = MemorySegment.ofArray(m.getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                    host.put(0x2000 + i * 64L, msg, 0, msg.byteSize());
                    host.put(Wqe.OP_SEND, 0, 0, DpaWireTest.Loop.BUF + 0x2000 + i * 64L, 40, 0, 0);
                }
                host.ring(); // the whole burst at once, racing the handler's arm
                int sends = 0;
                int receives = 0;
                for (int i = 0; i < 2 * BURST; i++) {
                    int op;
                    try {
                        op = host.awaitCqe("burst " + b + " completion " + i);
                    } catch (AssertionError e) {
                        throw new AssertionError(e.getMessage() + "\nDPA CQ " + dpa.cqState(cqn) + "\n" + String.join("\n", w.rig.dev.dpaThreads())
                                + "\nechoed " + w.word(proc, DpaQueueProgs.ECHOED) + " ci " + w.word(proc, DpaQueueProgs.CI) + " pi "
                                + w.word(proc, DpaQueueProgs.PI) + " rq " + w.word(proc, DpaQueueProgs.RQ_POSTED) + "\nfindings " + w.unit().findings()
                                + "\n" + w.rig.dev.lastRefusal() + "\nstatus " + w.unit().processStatus(proc.pid()) + " " + w.unit().crashData(proc.pid())
                                + "\n" + w.rig.dev.describe(), e);
                    }
                    if (op == Cq.CQE_REQ) {
                        sends++;
                    } else {
                        assertEquals(Cq.CQE_RESP_SEND, op, "an echo received");
                        assertEquals(40, host.lastByteCount(), "the echo has the message's length");
                        receives++;
                    }
                }
                assertEquals(BURST, sends, "every SEND of burst " + b + " completed");
                assertEquals(BURST, receives, "every message of burst " + b + " came back");
                for (int i = 0; i < BURST; i++) {
                    byte[] got = new byte[sent.get(i).length()];
                    for (int k = 0; k < got.length; k++) {
                        got[k] = host.get(0x1000 + i * 64L + k);
                    }
                    assertEquals(sent.get(i), new String(got, java.nio.charset.StandardCharsets.US_ASCII), "echo " + i + " of burst " + b);
                }
            }
            assertTrue(w.unit().awaitIdle(), "the DPA settles");
            if (bursts > 0) {
                assertEquals(bursts * BURST, w.word(proc, DpaQueueProgs.ECHOED), "one echo per message, none more");
                DpaNic.CqState s = dpa.cqState(cqn);
                assertTrue(s.armed() && s.producerIndex() == 2L * bursts * BURST, "armed by the handler with every CQE consumed: " + s);
                assertEquals(List.of(), w.unit().findings(), "the memory model found nothing");
            }
            w.rig.ok(w.destroy(Mlx5Cmd.DESTROY_QP, a, qpn));
        }
        w.rig.ok(w.destroy(Mlx5Cmd.DESTROY_CQ, a, cqn));
        w.destroyObj(OBJ_DPA_THREAD, a, tid);
        w.rig.ok(w.destroy(Mlx5Cmd.DESTROY_MKEY, a, key >>> 8));
        w.destroyProcess(a, proc);
        assertEquals(List.of(), dpa.leaks());
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_PD, a, pd));
        w.rig.ok(w.destroy(Mlx5Cmd.DEALLOC_UAR, a, uar));
        w.destroyUctx(a);
        assertEquals(0, w.rig.dev.devxLive());
    }
}
