package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.kernel.iommu.IommuDomain;

/** The transport engine's behaviour on pinned keys: transfers, syndromes, retries, state commands, races. */
class EngineTest extends EngineRig {

    @Test
    void rdmaWriteMovesTheBytesAndWritesASendCqeWithTheWqeIndex() {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        proc.write(a.va, new byte[] {1, 2, 3, 4}, 0, 4);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 4);
        w.remoteAddr = b.va + 100;
        w.rkey = b.key;
        a.ring();
        Cqe c = a.cqe();
        assertTrue(c.isSend);
        assertEquals(Wqe.OP_RDMA_WRITE, c.opcode);
        assertEquals(0, c.wqeIndex);
        assertEquals(4, c.byteCnt);
        byte[] got = new byte[4];
        proc.read(b.va + 100, got, 0, 4);
        assertEquals(3, got[2]);
    }

    @Test
    void aWrongRkeyIsARemoteAccessSyndromeAndBothQpsGoToErr() {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 8);
        w.remoteAddr = b.va;
        w.rkey = b.key + 1; // another key byte: a stale or guessed key
        a.ring();
        Cqe c = a.cqe();
        assertEquals(Cqe.OPCODE_ERROR, c.opcode);
        assertEquals(Cqe.SYNDROME_REMOTE_ACCESS_ERR, c.syndrome);
        assertEquals(Wqe.OP_RDMA_WRITE, c.errorOpcode);
        assertEquals(HwQpState.ERR, a.qp.state());
        assertEquals(HwQpState.ERR, b.qp.state(), "class A/C error: the responder goes to ERR too");
    }

    @Test
    void aSendWithoutAReceiveBacksOffThenEndsInRnrRetryExceeded() {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        a.wqe(Wqe.OP_SEND, a.va, 8);
        a.ring();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (a.cq.producerIndex() == 0) {
            assertTrue(System.nanoTime() < deadline, "the retry completed");
            Thread.onSpinWait();
        }
        assertEquals(Cqe.SYNDROME_RNR_RETRY_EXC_ERR, a.cqe().syndrome);
        assertEquals(2, a.dev.rnrNaks(), "the first try and one retry (rnr_retry 1)");
    }

    @Test
    void aSendConsumesTheReceiveWqeAndReportsItsIndex() {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        b.recv(b.va, 64);
        b.recv(b.va + 64, 64);
        SendWqe w = a.wqe(Wqe.OP_SEND_IMM, a.va, 16);
        w.imm = 0x1234;
        a.ring();
        assertEquals(Wqe.OP_SEND_IMM, a.cqe().opcode);
        Cqe r = b.cqe();
        assertTrue(!r.isSend);
        assertEquals(Cqe.RECV_SEND_IMM, r.opcode);
        assertEquals(0, r.wqeIndex);
        assertEquals(0x1234, r.imm);
        assertEquals(a.qp.qpn, r.srcQp);
        assertEquals(a.lid(), r.slid);
    }

    @Test
    void transitionCommandsAreCheckedAgainstTheState() {
        Side a = new Side(0);
        HwCommandException e = assertThrows(HwCommandException.class, () -> a.qp.modify(QpCommand.RTR2RTS, new QpContext()));
        assertEquals(HwCommandException.STAT_BAD_QP_STATE, e.status());
        QpContext bad = new QpContext();
        bad.mtu = 6;
        e = assertThrows(HwCommandException.class, () -> a.qp.modify(QpCommand.RST2INIT, bad));
        assertEquals(HwCommandException.STAT_BAD_PARAM, e.status());
        assertEquals(HwQpState.RST, a.qp.state(), "a refused command changes nothing");
    }

    @Test
    void aCqInUseCannotBeDestroyedAndAFullCqOverrunsWithAnEvent() {
        Side a = new Side(0);
        HwCommandException e = assertThrows(HwCommandException.class, () -> a.dev.hw2swCq(a.cq));
        assertEquals(HwCommandException.STAT_RESOURCE_BUSY, e.status());
        List<Boolean> events = new ArrayList<>();
        a.dev.setEventHandler((cq, error) -> events.add(error));
        HwCq small = a.dev.sw2hwCq(1);
        assertTrue(small.push(a.qp.qpn, true, 0, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, false));
        assertTrue(!small.push(a.qp.qpn, true, 1, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, false), "no room: overrun");
        assertTrue(small.inError());
        assertEquals(List.of(true), events, "a CQ-error event");
        a.dev.hw2swCq(small);
    }

    /**
     * The arm carries the consumer index (mlx5 PRM, {@code mlx5_arm_cq}; {@code mlx4_cq_arm}): a CQ
     * armed while a CQE at or past that index waits fires at once, since the driver has not seen
     * it ({@code mlx5e_napi_poll} arms after its last poll and never polls again). A CQE that
     * lands between the last poll and the arm would otherwise wait for the next completion.
     * Armed with every CQE consumed, nothing fires until the next one; a solicited-only arm fires
     * at once only for a waiting solicited or error CQE.
     */
    @Test
    void anArmBehindAWaitingCqeFiresAtOnce() {
        Side a = new Side(0);
        List<HwCq> events = new ArrayList<>();
        a.dev.setEventHandler((cq, error) -> events.add(cq));
        HwCq cq = a.dev.sw2hwCq(8);
        assertTrue(cq.push(a.qp.qpn, true, 0, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, false));
        // the driver polled nothing: its consumer index is 0, CQE 0 waits
        cq.arm(false, 0);
        assertEquals(List.of(cq), events, "the waiting CQE is an event at once");
        cq.consumerIndex(1);
        cq.arm(false, 1);
        assertEquals(1, events.size(), "everything consumed: no event until the next CQE");
        assertTrue(cq.push(a.qp.qpn, true, 1, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, false));
        assertEquals(2, events.size(), "the next CQE fires the arm");
        assertTrue(cq.push(a.qp.qpn, true, 2, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, false));
        assertEquals(2, events.size(), "one event per arm");
        cq.arm(true, 1);
        assertEquals(2, events.size(), "solicited only: the two waiting CQEs are unsolicited successes");
        cq.arm(true, 1);
        assertTrue(cq.push(a.qp.qpn, false, 0, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, true));
        assertEquals(3, events.size(), "a solicited CQE fires a solicited arm");
        cq.arm(true, 1);
        assertEquals(4, events.size(), "the solicited CQE (index 3) still waits: a solicited arm at 1 fires at once");
        cq.consumerIndex(4);
        cq.arm(true, 4);
        cq.arm(false, 4);
        assertEquals(4, events.size(), "consumed: nothing waits");
        a.dev.hw2swCq(cq);
    }

    /**
     * A completion event is counted by the CQ when decided, under its lock, before the handler
     * runs, and stays counted: while the handler runs (and after) the CQ reads not armed with the
     * event counted, so a consumer comparing the count with the events it received (the DPA's
     * lost wake-up check) tells "on its way" from "received". A zero CQE is an event too, counted
     * without disarming; a CQ error is not a completion event.
     */
    @Test
    void completionEventsAreCountedBeforeDeliveryAndStayCounted() {
        Side a = new Side(0);
        List<HwCq.ArmState> seen = new ArrayList<>();
        HwCq cq = a.dev.sw2hwCq(2);
        a.dev.setEventHandler((c, error) -> seen.add(c.armState()));
        assertEquals(new HwCq.ArmState(false, 0), cq.armState());
        cq.arm(false, 0);
        assertEquals(new HwCq.ArmState(true, 0), cq.armState());
        assertTrue(cq.push(a.qp.qpn, true, 0, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, false));
        assertEquals(List.of(new HwCq.ArmState(false, 1)), seen, "counted and disarmed when the handler runs");
        assertEquals(new HwCq.ArmState(false, 1), cq.armState(), "still counted after it returned");
        cq.arm(false, 0); // CQE 0 waits: fires at once
        assertEquals(new HwCq.ArmState(false, 2), seen.get(1));
        cq.arm(false, 1);
        cq.zeroCqe();
        assertEquals(new HwCq.ArmState(true, 3), seen.get(2), "a zero CQE: counted, the arm kept");
        assertTrue(cq.push(a.qp.qpn, true, 1, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, false));
        assertEquals(new HwCq.ArmState(false, 4), seen.get(3));
        assertFalse(cq.push(a.qp.qpn, true, 2, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, false), "overrun");
        assertEquals(new HwCq.ArmState(false, 4), cq.armState(), "the CQ error event is not a completion event");
        a.dev.hw2swCq(cq);
    }

    /**
     * A request whose response lands in the local buffer (RDMA READ, compare-and-swap,
     * fetch-and-add) cannot take its local side inline: there is no buffer to land in. The device
     * answers it as a malformed WQE (LOCAL_QP_OP_ERR, the QP to ERR) and nothing lands at the
     * remote side's buffer or is logged as an engine failure (it once threw a NullPointerException
     * in the DMA mover, caught and logged by the requester; found by the WQE fuzzer's long form).
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(ints = {Wqe.OP_RDMA_READ, Wqe.OP_ATOMIC_CS, Wqe.OP_ATOMIC_FA})
    void aResponseIntoAnInlineLocalSideIsAMalformedRequest(int op) {
        java.util.logging.Logger log = java.util.logging.Logger.getLogger("org.peerdirect.hca");
        List<java.util.logging.LogRecord> records = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.logging.Handler h = new java.util.logging.Handler() {
            @Override
            public void publish(java.util.logging.LogRecord r) {
                records.add(r);
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        log.addHandler(h);
        try {
            Side a = new Side(0);
            Side b = new Side(1);
            a.connect(b);
            b.connect(a);
            proc.write(b.va, new byte[] {9, 9, 9, 9, 9, 9, 9, 9}, 0, 8);
            SendWqe w = a.wqe(op, a.va, 8);
            w.ctrl |= Wqe.CTRL_INLINE;
            w.numSge = 0;
            w.inlineLen = 8;
            w.remoteAddr = b.va;
            w.rkey = b.key;
            w.compareAdd = 9;
            w.swap = 1;
            a.ring();
            Cqe c = a.cqe();
            assertEquals(Cqe.OPCODE_ERROR, c.opcode);
            assertEquals(Outcome.LOC_QP_OP_ERR.syndrome, c.syndrome, "a malformed request");
            assertEquals(HwQpState.ERR, a.qp.state());
            byte[] got = new byte[8];
            proc.read(b.va, got, 0, 8);
            assertEquals(9, got[0], "the remote word untouched");
            assertTrue(records.isEmpty(), () -> "no engine failure logged: " + records.stream()
                    .map(r -> r.getMessage() + " " + r.getThrown()).toList());
        } finally {
            log.removeHandler(h);
        }
    }

    /**
     * Producers on several threads completing into one CQ (as the two sides of a connection do
     * from their own threads): each CQE lands in a slot of its own, none lost or written twice,
     * each producer's in its order (four producers keep the CQ's producer lock contended).
     */
    @Test
    void producersRacingIntoOneCqEachGetASlotOfTheirOwn() throws Exception {
        Side a = new Side(0);
        int producers = 4;
        int each = 5000;
        HwCq shared = a.dev.sw2hwCq(producers * each);
        java.util.concurrent.CyclicBarrier start = new java.util.concurrent.CyclicBarrier(producers);
        List<Thread> threads = new ArrayList<>();
        java.util.concurrent.atomic.AtomicReference<Throwable> failed = new java.util.concurrent.atomic.AtomicReference<>();
        for (int t = 0; t < producers; t++) {
            int id = t;
            threads.add(Thread.ofPlatform().name("cq-producer-" + t).start(() -> {
                try {
                    start.await(10, java.util.concurrent.TimeUnit.SECONDS);
                    for (int i = 0; i < each; i++) {
                        if (!shared.push(a.qp.qpn, true, (long) id << 32 | i, Wqe.OP_SEND, Outcome.SUCCESS, 0, 0, 0, 0, 0, false)) {
                            throw new AssertionError("producer " + id + ": overrun at " + i);
                        }
                    }
                } catch (Throwable e) {
                    failed.compareAndSet(null, e);
                }
            }));
        }
        for (Thread t : threads) {
            t.join(60_000);
            assertTrue(!t.isAlive(), t.getName() + " still pushing after 60 s");
        }
        assertNull(failed.get(), () -> "a producer failed: " + failed.get());
        assertEquals(producers * each, shared.producerIndex());
        long[] next = new long[producers];
        for (long p = 0; p < shared.producerIndex(); p++) {
            long w = shared.cqe(p).wqeIndex;
            int id = (int) (w >>> 32);
            assertEquals(next[id], w & 0xffff_ffffL, "producer " + id + "'s CQEs in its order, each once (slot " + p + ")");
            next[id]++;
        }
        for (int t = 0; t < producers; t++) {
            assertEquals(each, next[t], "every CQE of producer " + t);
        }
        assertTrue(!shared.inError());
        a.dev.hw2swCq(shared);
    }

    @Test
    void mptIndicesAreReusedAndTheKeyByteRotatesSoAStaleKeyMisses() {
        Side a = new Side(0);
        int k1 = a.dev.sw2hwMpt(1, a.va, 4096, ALL, new long[] {IommuDomain.IOVA_BASE}, new long[] {4096});
        a.dev.freeMpt(k1);
        int k2 = a.dev.sw2hwMpt(1, a.va, 4096, ALL, new long[] {IommuDomain.IOVA_BASE}, new long[] {4096});
        assertNotEquals(k1, k2, "a new key for the reused entry");
        assertNull(a.dev.mpt(k1), "the stale key names no entry");
        a.dev.freeMpt(k2);
        // more cycles than the table has entries, with one entry alive: never full
        for (int i = 0; i < HcaDevice.MAX_MPT + 10; i++) {
            a.dev.freeMpt(a.dev.sw2hwMpt(1, a.va, 4096, ALL, new long[] {IommuDomain.IOVA_BASE}, new long[] {4096}));
        }
        assertEquals(1, a.dev.mptCount());
    }

    @Test
    void qpNumbersAreReused() {
        Side a = new Side(0);
        for (int i = 0; i < HcaDevice.MAX_QP + 10; i++) {
            a.dev.createQp(1, HcaDevice.ST_UD, new QpCaps(1, 1, 1, 1, 0, false), a.cq, a.cq, null).destroy();
        }
        assertEquals(1, a.dev.qps().size());
    }

    /**
     * The race a flaky integration test showed: a QP moved to ERR while its WQE moves data, then
     * its key revoked (device removal, disassociation). The WQE must end in success or a flush,
     * never in a protection error from a key revoked under it: the ERR command waits until the
     * requester is quiet. Many SGEs widen the window between chunks.
     */
    @Test
    void aKeyRevokedAfterTheMoveToErrNeverFailsTheWqeInFlight() throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        for (int i = 0; i < 300; i++) {
            a.connect(b);
            b.connect(a);
            SendWqe w = a.qp.sqSlot(a.sqPi);
            w.opcode = Wqe.OP_RDMA_WRITE;
            w.ctrl = Wqe.CTRL_CQ_UPDATE;
            w.numSge = 2;
            for (int k = 0; k < 2; k++) {
                w.addr[k] = a.va + k * 32768L;
                w.byteCount[k] = 32768;
                w.lkey[k] = a.key;
            }
            w.length = 65536;
            w.remoteAddr = b.va;
            w.rkey = b.key;
            java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
            Thread t = Thread.ofPlatform().start(() -> {
                go.countDown();
                a.ring();
            });
            go.await();
            a.qp.modify(QpCommand.TO_ERR, new QpContext());
            a.dev.hw2swMpt(a.key); // the key goes once the QP is quiet
            t.join(10_000);
            Cqe c = a.cqe();
            assertTrue(c.opcode == Wqe.OP_RDMA_WRITE || c.syndrome == Cqe.SYNDROME_WR_FLUSH_ERR,
                    "iteration " + i + ": success or flush, not syndrome 0x" + Integer.toHexString(c.syndrome));
            // back to work: a fresh key for the same memory, both QPs reset
            a.dev.freeMpt(a.key);
            a.rekey();
            a.qp.modify(QpCommand.TO_RST, new QpContext());
            b.qp.modify(QpCommand.TO_RST, new QpContext());
            b.cqCi = b.cq.producerIndex();
            b.cq.consumerIndex(b.cqCi);
        }
    }
}
