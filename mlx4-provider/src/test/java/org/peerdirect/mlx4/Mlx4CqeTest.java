package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx3.ifc.Be;
import org.peerdirect.hca.cx3.ifc.Cqe;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/**
 * The CQ ring as bytes in the driver's memory: what the ConnectX-3 model wrote there
 * ({@code struct mlx4_cqe}, {@code mlx4_err_cqe}), the owner bit of each pass over the ring, the
 * consumer index the driver gives back in the doorbell record, and a full ring told apart from an
 * overrun one.
 */
class Mlx4CqeTest {

    @TempDir
    Path tmp;
    Lab lab;
    Lab.End a;
    Lab.End b;
    IbvCq cq;
    Mlx4Cq ring;
    IbvQp qp;

    @BeforeEach
    void up() {
        lab = new Lab(tmp, 2);
        a = lab.new End(0, 1 << 20, IbvQpType.RC, Lab.RW);
        b = lab.new End(1, 1 << 20, IbvQpType.RC, Lab.RW);
        Mlx4Cq[] table = lab.devs.get(0).cqTable;
        List<Mlx4Cq> before = java.util.Arrays.stream(table).filter(c -> c != null).toList();
        cq = a.ctx.createCq(4, null);
        ring = java.util.Arrays.stream(table).filter(c -> c != null && !before.contains(c)).findFirst().orElseThrow();
        IbvQpInitAttr ia = new IbvQpInitAttr();
        ia.sendCq = cq;
        ia.recvCq = cq;
        ia.maxSendWr = 16;
        ia.maxRecvWr = 16;
        qp = a.pd.createQp(ia);
        Lab.End a2 = lab.new End(lab, a, qp, cq);
        Lab.connect(a2, b, 1, 7, 4, 3);
    }

    @AfterEach
    void down() {
        qp.destroy();
        cq.destroy();
        lab.close();
    }

    private void write(long wrId, int len, int rkey) {
        IbvSendWr w = new IbvSendWr().sge(a.buf, len, a.mr.lkey());
        w.opcode = IbvWrOpcode.RDMA_WRITE;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.wrId = wrId;
        w.remoteAddr = b.buf;
        w.rkey = rkey;
        qp.postSend(w);
    }

    /** Waits until the device wrote CQE {@code i} (its owner bit is the bit of {@code i}'s pass), returns its bytes. */
    private MemorySegment written(long i) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        for (;;) {
            MemorySegment e = ring.cqeBytes(i);
            boolean owner = (e.get(Be.U8, Cqe.OWNER_SR_OPCODE) & Cqe.OWNER_MASK) != 0;
            if (owner == ((i & ring.nent) != 0)) {
                return e;
            }
            assertTrue(System.nanoTime() < deadline, "CQE " + i + " never written");
            Thread.onSpinWait();
        }
    }

    @Test
    void aSendCompletionIsAnMlx4CqeInTheRingAndTheConsumerIndexGoesBackInTheRecord() {
        assertEquals(4, ring.nent);
        write(5, 100, b.mr.rkey());
        MemorySegment e = written(0);
        int own = e.get(Be.U8, Cqe.OWNER_SR_OPCODE) & 0xff;
        assertEquals(0, own & Cqe.OWNER_MASK, "first pass: owner bit clear");
        assertEquals(Cqe.IS_SEND_MASK, own & Cqe.IS_SEND_MASK);
        assertEquals(Cqe.SEND_RDMA_WRITE, own & Cqe.OPCODE_MASK);
        assertEquals(100, e.get(Be.BE32, Cqe.BYTE_CNT));
        assertEquals(0, e.get(Be.BE16, Cqe.WQE_INDEX));
        assertEquals(qp.qpNum(), e.get(Be.BE32, Cqe.VLAN_MY_QPN) & Cqe.QPN_MASK);
        assertEquals(0, ring.setCiRecord(), "nothing consumed yet");
        IbvWc wc = Lab.await(cq, 1).get(0);
        assertEquals(IbvWcStatus.SUCCESS, wc.status);
        assertEquals(IbvWcOpcode.RDMA_WRITE, wc.opcode);
        assertEquals(5, wc.wrId);
        assertEquals(100, wc.byteLen);
        assertEquals(1, ring.setCiRecord(), "set_ci after the poll");
    }

    @Test
    void theOwnerBitFlipsOnTheSecondPassOfTheRing() {
        for (int i = 0; i < 5; i++) {
            write(10 + i, 64, b.mr.rkey());
            assertEquals(10 + i, Lab.await(cq, 1).get(0).wrId);
        }
        MemorySegment fifth = written(4);
        assertEquals(Cqe.OWNER_MASK, fifth.get(Be.U8, Cqe.OWNER_SR_OPCODE) & Cqe.OWNER_MASK, "second pass: owner bit set");
        assertEquals(4, fifth.get(Be.BE16, Cqe.WQE_INDEX), "the send queue's fifth WQE");
        assertEquals(5, ring.setCiRecord());
    }

    @Test
    void anErrorCompletionIsAnMlx4ErrCqeWithItsSyndrome() {
        write(9, 64, b.mr.rkey() ^ 0x100); // a key the peer never gave
        MemorySegment e = written(0);
        int own = e.get(Be.U8, Cqe.OWNER_SR_OPCODE) & 0xff;
        assertEquals(Cqe.OPCODE_ERROR, own & Cqe.OPCODE_MASK);
        assertEquals(Cqe.IS_SEND_MASK, own & Cqe.IS_SEND_MASK);
        assertEquals(Cqe.SYNDROME_REMOTE_ACCESS_ERR, e.get(Be.U8, Cqe.SYNDROME) & 0xff);
        assertEquals(qp.qpNum(), e.get(Be.BE32, Cqe.VLAN_MY_QPN) & Cqe.QPN_MASK);
        IbvWc wc = Lab.await(cq, 1).get(0);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, wc.status);
        assertEquals(e.get(Be.U8, Cqe.VENDOR_ERR_SYNDROME) & 0xff, wc.vendorErr);
        assertEquals(9, wc.wrId);
    }

    @Test
    void aReceiveCqeCarriesTheImmediateAndTheSource() {
        IbvRecvWr r = new IbvRecvWr().sge(a.buf, 256, a.mr.lkey());
        r.wrId = 77;
        qp.postRecv(r);
        IbvSendWr w = new IbvSendWr().sge(b.buf, 200, b.mr.lkey());
        w.opcode = IbvWrOpcode.SEND_WITH_IMM;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.immData = 0xabcd;
        b.qp.postSend(w);
        MemorySegment e = written(0);
        int own = e.get(Be.U8, Cqe.OWNER_SR_OPCODE) & 0xff;
        assertEquals(0, own & Cqe.IS_SEND_MASK);
        assertEquals(Cqe.RECV_SEND_IMM, own & Cqe.OPCODE_MASK);
        assertEquals(0xabcd, e.get(Be.BE32, Cqe.IMMED_RSS_INVALID));
        assertEquals(200, e.get(Be.BE32, Cqe.BYTE_CNT));
        assertEquals(b.qp.qpNum(), e.get(Be.BE32, Cqe.G_MLPATH_RQPN) & Cqe.QPN_MASK);
        IbvWc wc = Lab.await(cq, 1).get(0);
        assertEquals(77, wc.wrId);
        assertEquals(IbvWcOpcode.RECV, wc.opcode);
        assertTrue((wc.wcFlags & IbvWc.WC_WITH_IMM) != 0);
        assertEquals(0xabcd, wc.immData);
        Lab.await(b.cq, 1);
    }

    @Test
    void aFullRingIsNotAnOverrunAndAnOverrunIsReportedAtThePoll() {
        for (int i = 0; i < 4; i++) {
            write(20 + i, 64, b.mr.rkey());
        }
        written(3);
        IbvWc[] wc = {new IbvWc(), new IbvWc(), new IbvWc(), new IbvWc()};
        assertEquals(4, cq.poll(4, wc), "a full ring: the device asked, no overflow, every CQE read");
        assertEquals(23, wc[3].wrId);
        assertTrue(lab.devs.get(0).core().cmd.log().entries().stream().anyMatch(x -> x.opcode() == Mlx4Cmd.QUERY_CQ),
                "the full ring was checked with QUERY_CQ");
        for (int i = 0; i < 5; i++) {
            write(30 + i, 64, b.mr.rkey());
        }
        written(7);
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (lab.machine.engine(0).cqOverruns() == 0) {
            assertTrue(System.nanoTime() < deadline, "no overrun");
            Thread.onSpinWait();
        }
        assertEquals(-1, cq.poll(4, wc), "the overrun CQ reports its error");
        assertNotNull(ring);
    }
}
