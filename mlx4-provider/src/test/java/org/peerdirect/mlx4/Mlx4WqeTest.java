package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.QpContext;
import org.peerdirect.hca.cx3.ifc.Wqe;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx4.core.Mlx4CmdException;
import org.peerdirect.mlx4.core.Qp;
import org.peerdirect.mlx4.lib.Mlx4Qp;

/**
 * The ConnectX-3's work queues as bytes: send WQEs in the user's process with the owner bit of
 * their pass over the ring, BlueFlame for a single inline send (counted by the device), a WQE the
 * user's program corrupted in its own memory answered with an error completion, and a QP context
 * naming a CQ the device does not own refused with {@code mlx4_status_to_errno}'s errno.
 */
class Mlx4WqeTest {

    @TempDir
    Path tmp;
    Lab lab;
    Lab.End a;
    Lab.End b;

    @BeforeEach
    void up() {
        lab = new Lab(tmp, 2);
        a = lab.new End(0, 1 << 20, IbvQpType.RC, Lab.RW);
        b = lab.new End(1, 1 << 20, IbvQpType.RC, Lab.RW);
        Lab.connect(a, b, 1, 7, 14, 7);
    }

    @AfterEach
    void down() {
        lab.close();
    }

    private Mlx4Qp lib(IbvQp qp, int dev) {
        return lab.devs.get(dev).qpTable[qp.qpNum()].lib;
    }

    private static IbvSendWr write(Lab.End from, Lab.End to, int len, long wrId) {
        IbvSendWr w = new IbvSendWr().sge(from.buf, len, from.mr.lkey());
        w.opcode = IbvWrOpcode.RDMA_WRITE;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.remoteAddr = to.buf + wrId * 8 % 4096;
        w.rkey = to.mr.rkey();
        w.wrId = wrId;
        return w;
    }

    /** The model's counter {@code what} from its description (its own words, as the lab's tools show it). */
    private long counter(int dev, String what) {
        String d = lab.machine.board(dev).describe();
        Matcher m = Pattern.compile(Pattern.quote(what) + " (\\d+)").matcher(d);
        assertTrue(m.find(), what + " in: " + d);
        return Long.parseLong(m.group(1));
    }

    @Test
    void sendWqesAreBytesInTheProcessWithTheOwnerBitOfTheirPass() {
        Mlx4Qp q = lib(a.qp, 0);
        int n = q.sqWqes();
        for (int i = 0; i < 2 * n + 3; i++) {
            a.qp.postSend(write(a, b, 16, i));
            MemorySegment w = MemorySegment.ofArray(q.sendWqeBytes(i));
            int ownerOpcode = w.get(BE32, Wqe.CTRL_OWNER_OPCODE);
            assertEquals((i & n) != 0, (ownerOpcode & Wqe.OWNER_BIT) != 0, "WQE " + i + ": the owner bit of pass " + i / n);
            assertEquals(Wqe.OP_RDMA_WRITE, ownerOpcode & Wqe.OPCODE_MASK);
            assertEquals(3, w.get(U8, Wqe.CTRL_FENCE_SIZE) & Wqe.SIZE_MASK, "ctrl + raddr + one data segment");
            assertEquals(Wqe.CTRL_CQ_UPDATE, w.get(BE32, Wqe.CTRL_SRCRB_FLAGS));
            assertEquals(b.buf + i * 8L % 4096, w.get(BE64, Wqe.CTRL_SIZE + Wqe.RADDR_VA));
            assertEquals(b.mr.rkey(), w.get(BE32, Wqe.CTRL_SIZE + Wqe.RADDR_RKEY));
            long d = Wqe.CTRL_SIZE + Wqe.RADDR_SIZE;
            assertEquals(16, w.get(BE32, d + Wqe.DATA_BYTE_COUNT));
            assertEquals(a.mr.lkey(), w.get(BE32, d + Wqe.DATA_LKEY));
            assertEquals(a.buf, w.get(BE64, d + Wqe.DATA_ADDR));
            IbvWc c = Lab.await(a.cq, 1).get(0);
            assertEquals(IbvWcStatus.SUCCESS, c.status);
            assertEquals(i, c.wrId, "the CQE's wqe_index names WQE " + i);
        }
        assertEquals(2L * n + 3, counter(0, "send WQEs fetched"), "each WQE fetched once by DMA");
        assertEquals(0, counter(0, "malformed"));
    }

    @Test
    void receiveWqesAreScatterListsEndedByTheInvalidLkeyAndTheRecordCountsThem() {
        Mlx4Qp q = lib(b.qp, 1); // max_recv_sge 4: 64-byte receive WQEs
        b.qp.postRecv(new IbvRecvWr().sge(b.buf, 100, b.mr.lkey()));
        IbvRecvWr two = new IbvRecvWr().sge(b.buf + 4096, 10, b.mr.lkey());
        two.next = new IbvRecvWr().sge(b.buf + 8192, 20, b.mr.lkey());
        b.qp.postRecv(two);
        assertEquals(3, q.rqDoorbellRecord(), "rq.head & 0xffff");
        MemorySegment w = MemorySegment.ofArray(q.recvWqeBytes(2));
        assertEquals(20, w.get(BE32, Wqe.DATA_BYTE_COUNT));
        assertEquals(b.mr.lkey(), w.get(BE32, Wqe.DATA_LKEY));
        assertEquals(b.buf + 8192, w.get(BE64, Wqe.DATA_ADDR));
        assertEquals(Wqe.INVALID_LKEY, w.get(BE32, Wqe.DATA_SIZE + Wqe.DATA_LKEY), "the list ends after one entry");
        IbvSendWr s = new IbvSendWr().sge(a.buf, 100, a.mr.lkey());
        s.opcode = IbvWrOpcode.SEND;
        s.sendFlags = IbvSendWr.SEND_SIGNALED;
        a.qp.postSend(s);
        IbvWc r = Lab.await(b.cq, 1).get(0);
        assertEquals(IbvWcStatus.SUCCESS, r.status);
        assertEquals(100, r.byteLen);
        assertEquals(3, counter(1, "receive WQEs fetched"), "the device read all three once it needed one");
    }

    @Test
    void anSrqIsAFreeListOfWqesInTheProcessTheDeviceWalks() {
        org.peerdirect.ib.core.verbs.IbvSrq srq = b.pd.createSrq(3, 1); // 4 WQEs: the list keeps one back
        org.peerdirect.ib.core.verbs.IbvQpInitAttr ia = new org.peerdirect.ib.core.verbs.IbvQpInitAttr();
        ia.sendCq = b.cq;
        ia.recvCq = b.cq;
        ia.srq = srq;
        Lab.End bs = lab.new End(lab, b, b.pd.createQp(ia), b.cq);
        Lab.End c = lab.new End(0, 1 << 16, IbvQpType.RC, Lab.RW);
        Lab.connect(c, bs, 1, 7, 14, 7);
        org.peerdirect.mlx4.lib.Mlx4Srq lib = lab.devs.get(1).srqTable[srq.srqNum()].lib;
        assertEquals(1, lib.nextOf(0), "WQE i links to i + 1");
        for (int i = 0; i < 3; i++) {
            IbvRecvWr r = new IbvRecvWr().sge(b.buf + 256L * i, 256, b.mr.lkey());
            r.wrId = 40 + i;
            srq.postRecv(r);
        }
        assertEquals(3, lib.dbRecord(), "the counter of WQEs posted");
        org.peerdirect.ib.core.verbs.PostException full = assertThrows(org.peerdirect.ib.core.verbs.PostException.class,
                () -> srq.postRecv(new IbvRecvWr().sge(b.buf, 8, b.mr.lkey())));
        assertEquals(Errno.ENOMEM, full.errno(), "the list's last WQE is kept back");
        IbvSendWr s = new IbvSendWr().sge(c.buf, 64, c.mr.lkey());
        s.opcode = IbvWrOpcode.SEND;
        s.sendFlags = IbvSendWr.SEND_SIGNALED;
        c.qp.postSend(s);
        assertEquals(IbvWcStatus.SUCCESS, Lab.await(c.cq, 1).get(0).status);
        IbvWc r = Lab.await(b.cq, 1).get(0);
        assertEquals(40, r.wrId, "the device took WQE 0, the list's head");
        assertEquals(0, lib.nextOf(3), "the completed WQE went back behind the tail (3)");
        IbvRecvWr again = new IbvRecvWr().sge(b.buf, 256, b.mr.lkey());
        again.wrId = 50;
        srq.postRecv(again);
        assertEquals(4, lib.dbRecord());
        bs.qp.destroy();
        srq.destroy();
    }

    @Test
    void blueFlameCarriesASingleInlineSendWhole() {
        byte[] msg = new byte[100];
        for (int i = 0; i < msg.length; i++) {
            msg[i] = (byte) (i * 7 + 1);
        }
        lab.proc.write(a.buf, msg, 0, msg.length);
        for (int i = 0; i < 4; i++) {
            b.qp.postRecv(new IbvRecvWr().sge(b.buf + 1024L * i, 1024, b.mr.lkey()));
        }
        IbvSendWr s = new IbvSendWr().sge(a.buf, msg.length, a.mr.lkey());
        s.opcode = IbvWrOpcode.SEND;
        s.sendFlags = IbvSendWr.SEND_SIGNALED | IbvSendWr.SEND_INLINE;
        long bf = counter(0, "by BlueFlame");
        long fetched = counter(0, "send WQEs fetched");
        a.qp.postSend(s);
        assertEquals(IbvWcStatus.SUCCESS, Lab.await(a.cq, 1).get(0).status);
        assertEquals(IbvWcStatus.SUCCESS, Lab.await(b.cq, 1).get(0).status);
        assertEquals(bf + 1, counter(0, "by BlueFlame"), "a single inline send goes by BlueFlame");
        byte[] got = new byte[msg.length];
        lab.proc.read(b.buf, got, 0, got.length);
        assertArrayEquals(msg, got, "the WQE the BlueFlame write carried, executed as written (two inline segments)");

        IbvSendWr s2 = new IbvSendWr().sge(a.buf, 8, a.mr.lkey());
        s2.opcode = IbvWrOpcode.SEND;
        s2.sendFlags = IbvSendWr.SEND_SIGNALED | IbvSendWr.SEND_INLINE;
        IbvSendWr s1 = new IbvSendWr().sge(a.buf, 8, a.mr.lkey());
        s1.opcode = IbvWrOpcode.SEND;
        s1.sendFlags = IbvSendWr.SEND_SIGNALED | IbvSendWr.SEND_INLINE;
        s1.next = s2;
        a.qp.postSend(s1);
        assertEquals(2, Lab.await(a.cq, 2).size());
        IbvSendWr plain = new IbvSendWr().sge(a.buf, 8, a.mr.lkey());
        plain.opcode = IbvWrOpcode.SEND;
        plain.sendFlags = IbvSendWr.SEND_SIGNALED;
        a.qp.postSend(plain);
        assertEquals(IbvWcStatus.SUCCESS, Lab.await(a.cq, 1).get(0).status);
        assertEquals(bf + 1, counter(0, "by BlueFlame"), "a chain, and a send that is not inline, ring the doorbell");
        assertEquals(fetched + 4, counter(0, "send WQEs fetched"));
    }

    @Test
    void sqSigAllAsksForACompletionInEveryWqe() {
        org.peerdirect.ib.core.verbs.IbvQpInitAttr ia = new org.peerdirect.ib.core.verbs.IbvQpInitAttr();
        ia.sendCq = a.cq;
        ia.recvCq = a.cq;
        ia.sqSigAll = true;
        Lab.End a2 = lab.new End(lab, a, a.pd.createQp(ia), a.cq);
        ia.sendCq = b.cq;
        ia.recvCq = b.cq;
        ia.sqSigAll = false;
        Lab.End b2 = lab.new End(lab, b, b.pd.createQp(ia), b.cq);
        Lab.connect(a2, b2, 1, 7, 14, 7);
        IbvSendWr w = write(a2, b2, 16, 5);
        w.sendFlags = 0;
        a2.qp.postSend(w);
        assertEquals(Wqe.CTRL_CQ_UPDATE, MemorySegment.ofArray(lib(a2.qp, 0).sendWqeBytes(0)).get(BE32, Wqe.CTRL_SRCRB_FLAGS));
        IbvWc c = Lab.await(a.cq, 1).get(0);
        assertEquals(5, c.wrId, "an unsignaled request of a QP created with sq_sig_all completes");
        a2.qp.destroy();
        b2.qp.destroy();
    }

    @Test
    void aWqeCorruptedInUserMemoryCompletesInErrorAndTheQpGoesToError() {
        Mlx4Qp q = lib(a.qp, 0);
        // the program scribbles over the WQE after the next one: an opcode the device does not know, its owner bit the
        // hardware's for the first pass; the next post's doorbell makes the device fetch both
        byte[] junk = new byte[16];
        MemorySegment j = MemorySegment.ofArray(junk);
        j.set(BE32, Wqe.CTRL_OWNER_OPCODE, 0x1f);
        j.set(U8, Wqe.CTRL_FENCE_SIZE, (byte) 1);
        lab.proc.write(q.sendWqeVa(1), junk, 0, junk.length);
        a.qp.postSend(write(a, b, 64, 1));
        List<IbvWc> c = Lab.await(a.cq, 2);
        assertEquals(IbvWcStatus.SUCCESS, c.get(0).status, "the WQE before it executes");
        assertEquals(IbvWcStatus.LOC_QP_OP_ERR, c.get(1).status, "the corrupted one: a local QP operation error");
        assertEquals(IbvQpState.ERR, a.qp.state(), "and the QP is in error, as the hardware leaves it");
        assertEquals(1, counter(0, "malformed"));
    }

    @Test
    void aContextNamingACqTheDeviceDoesNotOwnIsRefusedWithEbadf() {
        org.peerdirect.ib.core.verbs.IbvQpInitAttr ia = new org.peerdirect.ib.core.verbs.IbvQpInitAttr();
        ia.sendCq = a.cq;
        ia.recvCq = a.cq;
        IbvQp fresh = a.pd.createQp(ia);
        Mlx4Device dev = lab.devs.get(0);
        Mlx4IbQp ib = dev.qpTable[fresh.qpNum()];
        Mlx4CmdException e = assertThrows(Mlx4CmdException.class, () -> Qp.modify(dev.core, fresh.qpNum(), Mlx4Cmd.RST2INIT_QP, 0, x -> {
            x.set(BE32, QpContext.FLAGS, QpContext.STATE_INIT << 28 | QpContext.ST_RC << 16);
            x.set(BE32, QpContext.PD, ib.pd.pdn);
            x.set(BE32, QpContext.USR_PAGE, ib.pd.ctx.uar.index);
            x.set(BE32, QpContext.LOCAL_QPN, fresh.qpNum());
            x.set(BE32, QpContext.CQN_SEND, 0xfff0); // no CQ of this number is in hardware ownership
        }));
        assertEquals(Mlx4Cmd.STAT_BAD_RESOURCE, e.status());
        assertEquals(Errno.EBADF, e.errno(), "mlx4_status_to_errno(CMD_STAT_BAD_RESOURCE)");
        assertTrue(e.getMessage().contains("RST2INIT_QP"), e.getMessage());
        assertEquals(IbvQpState.RESET, fresh.query().qpState, "nothing was created");
        fresh.destroy();
    }
}
