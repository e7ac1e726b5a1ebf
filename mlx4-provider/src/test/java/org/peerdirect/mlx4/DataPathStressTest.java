package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.zip.CRC32;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/**
 * 8 RC QPs between two devices, mixed operations and sizes over host and peer memory, data
 * checked by CRC32 end to end, while a peer client invalidates the target memory and the traffic
 * re-registers it. {@code -Dhca.stress.ops=N} operations per QP (default 1500).
 *
 * <p>Asserted: every work request completes (success, or REM_ACCESS_ERR after an invalidation,
 * then WR_FLUSH_ERR); every successful transfer moved exactly the bytes sent; memory invalidated
 * is not written again until it is registered again; zero IOMMU faults (the Lab's close).
 */
class DataPathStressTest {

    static final int QPS = 8;
    static final int OPS = Integer.getInteger("hca.stress.ops", 1500);
    static final int REGION = 256 << 10;

    @TempDir
    Path tmp;

    /** One connection: a (dev0) sends into b (dev1), whose target is host or peer memory. */
    final class Conn {
        final int id;
        final Lab.End a;
        final Lab.End b;
        final long target;
        final boolean peer;
        volatile IbvMr targetMr;
        /** Set by the invalidator: CRC of the target right after the invalidation returned. */
        final AtomicReference<Long> frozenCrc = new AtomicReference<>();
        long posted;
        long completed;
        long ok;
        long accessErrors;

        Conn(Lab lab, int id, ExamplePeerMemory gpu) {
            this.id = id;
            a = lab.new End(0, REGION, IbvQpType.RC, Lab.RW);
            b = lab.new End(1, REGION, IbvQpType.RC, Lab.RW);
            peer = (id & 1) == 1;
            target = peer ? gpu.alloc(lab.proc.pid(), REGION) : b.buf;
            targetMr = peer ? b.pd.regMr(target, REGION, Lab.RW) : b.mr;
            Lab.connect(a, b, 1, 7, 4, 3);
        }
    }

    static long crc(Lab lab, long va, int len) {
        byte[] d = new byte[len];
        lab.proc.read(va, d, 0, len);
        CRC32 c = new CRC32();
        c.update(d);
        return c.getValue();
    }

    @Test
    void mixedTrafficWithInvalidationsAndReregistrations() throws Exception {
        try (Lab lab = new Lab(tmp, 2)) {
            ExamplePeerMemory gpu = new ExamplePeerMemory(lab.mm, "example_peer", 65536, false);
            lab.core.peerMemory().register(gpu, true);
            List<Conn> conns = new ArrayList<>();
            for (int i = 0; i < QPS; i++) {
                conns.add(new Conn(lab, i, gpu));
            }
            AtomicBoolean done = new AtomicBoolean();
            AtomicLong invalidations = new AtomicLong();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int first = t * QPS / 2;
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        traffic(lab, conns.subList(first, first + QPS / 2), first);
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            Thread inv = Thread.ofPlatform().start(() -> {
                SplittableRandom r = new SplittableRandom(7);
                try {
                    while (!done.get()) {
                        Conn c = conns.get(1 + 2 * r.nextInt(QPS / 2));
                        synchronized (c) {
                            if (c.frozenCrc.get() == null && gpu.invalidate(lab.proc.pid(), c.target) > 0) {
                                c.frozenCrc.set(crc(lab, c.target, REGION));
                                invalidations.incrementAndGet();
                            }
                        }
                        Thread.onSpinWait();
                        for (int k = 0; k < 20_000 && !done.get(); k++) {
                            Thread.onSpinWait();
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            for (Thread t : threads) {
                t.join(300_000);
                assertFalse(t.isAlive(), "traffic thread hung");
            }
            done.set(true);
            inv.join(60_000);
            if (failure.get() != null) {
                throw new AssertionError("stress failed", failure.get());
            }
            long ok = 0;
            long errors = 0;
            for (Conn c : conns) {
                assertEquals(c.posted, c.completed, "every work request of QP " + c.id + " completed");
                ok += c.ok;
                errors += c.accessErrors;
            }
            System.out.printf("stress: %d QPs, %d ok, %d REM_ACCESS_ERR after %d invalidations%n", QPS, ok, errors, invalidations.get());
            assertTrue(ok > QPS * OPS / 2, "most operations succeeded: " + ok);
            assertTrue(invalidations.get() > 0, "invalidations happened during traffic");
            for (Conn c : conns) {
                c.targetMr.dereg();
                if (c.peer) {
                    gpu.free(lab.proc.pid(), c.target);
                }
            }
            lab.core.peerClients().forEach(x -> x.unregister());
        }
    }

    private void traffic(Lab lab, List<Conn> mine, int seed) {
        SplittableRandom r = new SplittableRandom(seed);
        IbvSendWr w = new IbvSendWr();
        IbvRecvWr rw = new IbvRecvWr();
        IbvWc[] wc = {new IbvWc()};
        byte[] data = new byte[65536];
        for (int op = 0; op < OPS; op++) {
            for (Conn c : mine) {
                int len = 1 + r.nextInt(r.nextBoolean() ? 512 : 65536);
                int off = r.nextInt(REGION - 65536 - 8) & ~7;
                int kind = r.nextInt(10);
                r.nextBytes(data);
                lab.proc.write(c.a.buf, data, 0, len);
                CRC32 sent = new CRC32();
                sent.update(data, 0, len);
                w.sge(c.a.buf, len, c.a.mr.lkey());
                w.sendFlags = IbvSendWr.SEND_SIGNALED;
                w.wrId = c.posted;
                w.remoteAddr = c.target + off;
                w.rkey = c.targetMr.rkey();
                if (kind < 5) {
                    w.opcode = IbvWrOpcode.RDMA_WRITE;
                } else if (kind < 7) {
                    w.opcode = IbvWrOpcode.RDMA_READ;
                } else if (kind < 9) {
                    w.opcode = IbvWrOpcode.SEND;
                    rw.sge(c.b.buf, 65536, c.b.mr.lkey());
                    c.b.qp.postRecv(rw);
                } else {
                    w.opcode = IbvWrOpcode.ATOMIC_FETCH_AND_ADD;
                    w.sge(c.a.buf, 8, c.a.mr.lkey());
                    w.compareAdd = 1;
                }
                c.a.qp.postSend(w);
                c.posted++;
                IbvWc done = Lab.await(c.a.cq, 1).get(0);
                c.completed++;
                if (done.status == IbvWcStatus.SUCCESS) {
                    c.ok++;
                    verify(lab, c, w, len, sent.getValue());
                    if (w.opcode == IbvWrOpcode.SEND) {
                        IbvWc rc = Lab.await(c.b.cq, 1).get(0);
                        assertEquals(IbvWcStatus.SUCCESS, rc.status);
                        assertEquals(len, rc.byteLen);
                        assertEquals(sent.getValue(), crc(lab, c.b.buf, len), "SEND delivered the bytes");
                    }
                } else {
                    assertTrue(c.peer, "only peer memory is invalidated: " + done);
                    assertEquals(IbvWcStatus.REM_ACCESS_ERR, done.status, "an invalidated key: " + done);
                    c.accessErrors++;
                    recover(lab, c, w.opcode == IbvWrOpcode.SEND);
                }
            }
        }
    }

    private static void verify(Lab lab, Conn c, IbvSendWr w, int len, long sentCrc) {
        switch (w.opcode) {
            case RDMA_WRITE -> assertEquals(sentCrc, crc(lab, w.remoteAddr, len), "RDMA WRITE moved exactly the bytes sent");
            case RDMA_READ -> assertEquals(crc(lab, w.remoteAddr, len), crc(lab, c.a.buf, len), "RDMA READ brought the remote bytes");
            default -> {
            }
        }
    }

    /**
     * After an access error: the memory invalidated must not have changed since the invalidation
     * returned; then re-register it and reconnect the QP (RESET, then up again).
     */
    private void recover(Lab lab, Conn c, boolean sendPending) {
        synchronized (c) {
            Long frozen = c.frozenCrc.get();
            assertTrue(frozen != null, "an access error only after an invalidation");
            assertEquals(frozen.longValue(), crc(lab, c.target, REGION), "no write reached invalidated memory");
            c.targetMr.dereg();
            c.targetMr = c.b.pd.regMr(c.target, REGION, Lab.RW);
            c.frozenCrc.set(null);
        }
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.RESET;
        c.a.qp.modify(x, IbvQpAttr.STATE);
        c.b.qp.modify(x, IbvQpAttr.STATE);
        Lab.connect(c.a, c.b, 1, 7, 4, 3);
        IbvWc[] wc = {new IbvWc()};
        while (c.a.cq.poll(1, wc) > 0 || c.b.cq.poll(1, wc) > 0) {
            // leftovers of the errored connection are not counted
        }
    }
}
