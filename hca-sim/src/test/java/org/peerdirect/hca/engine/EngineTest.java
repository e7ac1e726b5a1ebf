package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
