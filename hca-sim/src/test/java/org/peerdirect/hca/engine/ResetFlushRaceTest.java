package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Test;

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
}
