package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A move to RESET that returned is the last word on a QP's completions: no flush CQE of it may be
 * written after, because the driver cleans its CQ of the QP's CQEs right after the command
 * ({@code mlx4_cq_clean}) and starts the QP's indices again ({@code mlx4_init_qp_indices}, the
 * receive doorbell record to 0).
 *
 * <p>The race (CI: mlx4 {@code DataPathStressTest}, "CQ in error"): a QP in ERR with its receive
 * queue in host memory has the timer poll its doorbell record ({@code HwQp.pollRqInError}). The
 * poll checked "in ERR" and then took the queue's consumer lock to flush; a 2RST_QP and the
 * driver's reset of the record in between made the flush read the record 0 as 2^16 - n new
 * WQEs (the record counts 16 bits), and push that many WR_FLUSH_ERR CQEs of the reset QP: the CQ
 * overran. Here the test holds the consumer lock so the timer's poll waits at it (after the
 * check, before the flush), moves the QP to RESET meanwhile (the lock is reentrant), resets the
 * record as libmlx4 does, and lets the poll go.
 */
class ResetFlushRaceTest extends EngineRig {

    /** A receive queue in host memory as the ConnectX-3 reads one: a 16-bit producer count in a doorbell record. */
    static final class Record16Fetcher implements RecvFetcher {
        volatile int record;
        /** WQEs fetched, under the queue's consumer lock. */
        int fetched;

        @Override
        public long fetch(RecvQueue q, long head, long tail) {
            long t = tail;
            int want = (int) Math.min(record - fetched & 0xffff, q.size() - (tail - head));
            for (; want > 0; want--) {
                q.slot(t).numSge = 0;
                fetched++;
                t++;
            }
            return t;
        }
    }

    @Test
    void noFlushCompletionAfterTheMoveToResetReturned() throws Exception {
        Side a = new Side(0);
        Record16Fetcher rec = new Record16Fetcher();
        RecvQueue rq = a.qp.recvQueue();
        rq.fetcher(rec);
        a.qp.modify(QpCommand.RST2INIT, new QpContext());
        rec.record = 3; // three receives posted, as the stress test's SENDs leave them consumed or flushed
        a.qp.modify(QpCommand.TO_ERR, new QpContext());
        assertEquals(3, a.cq.producerIndex(), "the three receives flushed at the move to ERR");
        a.cqCi = 3;
        a.cq.consumerIndex(3);

        ReentrantLock lock = rq.consumerLock;
        lock.lock();
        try {
            // the timer's poll of the record (every 200 µs in ERR) waits at the consumer lock: past its state check
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!lock.hasQueuedThreads()) {
                assertTrue(System.nanoTime() < deadline, "the timer's receive poll came to the consumer lock within 10 s");
                Thread.onSpinWait();
            }
            a.qp.modify(QpCommand.TO_RST, new QpContext()); // 2RST_QP returns ...
            rec.record = 0; // ... and the driver starts the QP's indices again
        } finally {
            lock.unlock();
        }
        // the poll runs now; it is done when the lock is free after it took it
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (lock.hasQueuedThreads()) {
            assertTrue(System.nanoTime() < deadline, "the timer's poll took the lock within 10 s");
            Thread.onSpinWait();
        }
        lock.lock();
        lock.unlock();
        assertFalse(a.cq.inError(), "the CQ overran: the reset QP's flush CQEs were written after 2RST returned ("
                + a.dev.cqOverruns.get() + " overrun)");
        assertEquals(3, a.cq.producerIndex(), "no CQE of the QP after the move to RESET returned");
    }

    /**
     * The same promise against the transport: 2RST_QP waits for the WQE executing
     * ({@code Requester.quiesce}), and when that WQE fails meanwhile its move of the QP to ERR must
     * not undo the RESET. Before, the failed WQE's {@code toError} turned RST into ERR after
     * {@code reset()} had set it: the command returned with the QP in ERR (an mlx5 QP keeps its
     * engine QP across RESET: its RST2INIT was then refused) and the ERR receive poll running,
     * which reads the doorbell record the driver has just set to 0 (see above). Here the WQE's
     * copy is held in flight by the DMA port while the RESET starts, and then fails.
     */
    @Test
    void aWqeFailingWhileTheQpIsResetLeavesItInReset() throws Exception {
        CountDownLatch inDma = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean first = new java.util.concurrent.atomic.AtomicBoolean(true);
        Side a = new Side(0, d -> new PageFaultTest.Forwarding(d) {
            @Override
            public void copyTo(long srcIova, org.peerdirect.kernel.dma.DmaPort dst, long dstIova, long len) {
                if (first.getAndSet(false)) {
                    inDma.countDown();
                    try {
                        assertTrue(release.await(10, TimeUnit.SECONDS), "released within 10 s");
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    throw new org.peerdirect.kernel.iommu.IommuFault(org.peerdirect.kernel.iommu.IommuFault.Kind.NOT_MAPPED, name(), srcIova,
                            "the test's fault on the held copy");
                }
                super.copyTo(srcIova, dst, dstIova, len);
            }
        });
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 4096);
        w.remoteAddr = b.va;
        w.rkey = b.key;
        Thread poster = Thread.ofPlatform().start(a::ring); // the requester runs in the ringing thread
        assertTrue(inDma.await(10, TimeUnit.SECONDS), "the WRITE's copy started");
        Thread reset = Thread.ofPlatform().start(() -> a.qp.modify(QpCommand.TO_RST, new QpContext()));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (a.qp.state() != HwQpState.RST) { // reset() has set RST; the command now waits for the WQE
            assertTrue(System.nanoTime() < deadline, "the RESET began within 10 s: " + a.qp);
            Thread.onSpinWait();
        }
        release.countDown(); // the copy fails: the WQE completes in error and the transport moves the QP to ERR
        poster.join(10_000);
        reset.join(10_000);
        assertFalse(poster.isAlive() || reset.isAlive(), "the WQE and the RESET ended");
        assertEquals(HwQpState.RST, a.qp.state(), "the RESET that returned is the QP's state: " + a.qp);
        a.qp.modify(QpCommand.RST2INIT, new QpContext()); // and the driver can bring it up again
    }

    /**
     * The same promise against a peer's request: QP b's responder runs in the thread of the peer's
     * requester (or the wire's receive thread), which b's 2RST_QP did not wait for (its
     * {@code Requester.quiesce} waits for b's own send queue only). The responder consumes the
     * receive WQE under the receive queue's lock and pushes the receive CQE after releasing it: a
     * reset in between returned, the driver cleaned b's CQEs from the CQ, and then the CQE of the
     * reset QP landed. Here the responder is held exactly there: the receive queue's limit event
     * (armed at one WQE) runs after the WQE is consumed and the lock released, before the CQE. The
     * reset starts while it is held; the test lets it go once the reset has returned or is
     * waiting for the responder ({@code responderWaits}).
     */
    @ParameterizedTest
    @ValueSource(ints = {Wqe.OP_SEND, Wqe.OP_RDMA_WRITE_IMM})
    void noReceiveCompletionOfAPeersRequestAfterTheMoveToResetReturned(int opcode) throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        resetWhileInTheResponder(a, b, opcode, true);
    }

    /** The same on a wire: b's responder runs in the link's receive thread ({@code WireResp}). */
    @Test
    void noReceiveCompletionOfAWireRequestAfterTheMoveToResetReturned() throws Exception {
        Side a = new Side(0, true);
        Side b = new Side(1, true);
        WireTest.wire(a, b, java.util.function.UnaryOperator.identity());
        WireTest.connect(a, b, WireTest.IP_B, 3);
        WireTest.connect(b, a, WireTest.IP_A, 3);
        resetWhileInTheResponder(a, b, Wqe.OP_SEND, false);
    }

    /**
     * a's request {@code opcode} held inside b's responder after b's receive WQE was consumed, b
     * reset meanwhile: no receive CQE of b after the reset returned. {@code inRinger}: the
     * responder runs in the thread ringing a's doorbell (in one JVM), whose end the test awaits.
     */
    private void resetWhileInTheResponder(Side a, Side b, int opcode, boolean inRinger) throws Exception {
        CountDownLatch inWindow = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        RecvQueue rq = b.qp.recvQueue();
        rq.onLimit(() -> {
            inWindow.countDown(); // the receive WQE is consumed, the queue's lock released, no CQE yet
            try {
                assertTrue(release.await(10, TimeUnit.SECONDS), "released within 10 s");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        b.recv(b.va, 4096);
        rq.arm(1); // fires when the one receive is consumed
        SendWqe w = a.wqe(opcode, a.va, 64);
        w.remoteAddr = b.va + 8192;
        w.rkey = b.key;
        w.imm = 0x1234;
        Thread poster = Thread.ofPlatform().start(a::ring); // a's requester runs b's responder in this thread
        assertTrue(inWindow.await(10, TimeUnit.SECONDS), "the request reached b's responder");
        java.util.concurrent.atomic.AtomicLong atReturn = new java.util.concurrent.atomic.AtomicLong(-1);
        Thread reset = Thread.ofPlatform().start(() -> {
            b.qp.modify(QpCommand.TO_RST, new QpContext());
            atReturn.set(b.cq.producerIndex()); // what the driver's mlx5_ib_cq_clean would see
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (reset.isAlive() && b.qp.stats().responderWaits.get() == 0) {
            assertTrue(System.nanoTime() < deadline, "the RESET returned or waited for the responder within 10 s: " + b.qp);
            Thread.onSpinWait();
        }
        release.countDown();
        poster.join(10_000);
        reset.join(10_000);
        assertFalse(poster.isAlive() || reset.isAlive(), "the request and the RESET ended");
        assertEquals(HwQpState.RST, b.qp.state());
        if (inRinger) {
            assertEquals(opcode, a.cqe().opcode, "a's request completed without error");
        } else {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (b.qp.resp.inFlight() != 0) { // the link's receive thread leaves b's responder
                assertTrue(System.nanoTime() < end, "the wire's responder ended within 10 s");
                Thread.onSpinWait();
            }
        }
        assertEquals(atReturn.get(), b.cq.producerIndex(), "a receive CQE of QP b was written after its 2RST_QP returned");
    }
}
