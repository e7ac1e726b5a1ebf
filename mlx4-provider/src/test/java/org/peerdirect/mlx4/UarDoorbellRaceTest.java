package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/**
 * Every QP of a device rings the same send-doorbell register of the device's UAR page (and every
 * CQ the same CQ doorbell), so doorbells of different threads land on one register back to back.
 * The device must act on the value each write carried, not on what the register holds when it
 * looks: the model read the register after the write, so a second thread's doorbell written in
 * between was taken twice and the first one's lost, and its work request never completed
 * (DataPathStressTest hung on it 2 times in 3).
 */
class UarDoorbellRaceTest {

    static final int THREADS = 4;
    static final int OPS = 3_000;

    @TempDir
    Path tmp;

    @Test
    void sendDoorbellsOfManyThreadsOnOneUarPageAreNeverLost() throws Exception {
        try (Lab lab = new Lab(tmp, 2)) {
            List<Lab.End[]> pairs = new ArrayList<>();
            for (int i = 0; i < THREADS; i++) {
                Lab.End a = lab.new End(0, 64 << 10, IbvQpType.RC, Lab.RW);
                Lab.End b = lab.new End(1, 64 << 10, IbvQpType.RC, Lab.RW);
                Lab.connect(a, b, 1, 7, 14, 7);
                pairs.add(new Lab.End[] {a, b});
            }
            CyclicBarrier start = new CyclicBarrier(THREADS);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            for (Lab.End[] p : pairs) {
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        IbvSendWr w = new IbvSendWr();
                        w.opcode = IbvWrOpcode.RDMA_WRITE;
                        w.sendFlags = IbvSendWr.SEND_SIGNALED;
                        w.sge(p[0].buf, 8, p[0].mr.lkey());
                        w.remoteAddr = p[1].buf;
                        w.rkey = p[1].mr.rkey();
                        start.await();
                        for (int op = 0; op < OPS && failure.get() == null; op++) {
                            w.wrId = op;
                            p[0].qp.postSend(w);
                            IbvWc wc = Lab.await(p[0].cq, 1).get(0);
                            assertEquals(IbvWcStatus.SUCCESS, wc.status, "op " + op);
                            assertEquals(op, wc.wrId, "completions in order");
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            for (Thread t : threads) {
                t.join(120_000);
                assertFalse(t.isAlive(), "a poster hung");
            }
            if (failure.get() != null) {
                throw new AssertionError("a doorbell was lost", failure.get());
            }
        }
    }
}
