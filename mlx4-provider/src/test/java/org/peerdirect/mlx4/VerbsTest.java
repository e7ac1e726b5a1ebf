package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvAh;
import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

class VerbsTest {

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
        Lab.connect(a, b, 1, 7, 4, 3);
    }

    @AfterEach
    void down() {
        lab.close();
    }

    private byte[] fill(long va, int len, int seed) {
        byte[] d = new byte[len];
        for (int i = 0; i < len; i++) {
            d[i] = (byte) (i * 13 + seed);
        }
        lab.proc.write(va, d, 0, len);
        return d;
    }

    private byte[] read(long va, int len) {
        byte[] d = new byte[len];
        lab.proc.read(va, d, 0, len);
        return d;
    }

    private static IbvSendWr wr(IbvWrOpcode op, long addr, int len, int lkey) {
        IbvSendWr w = new IbvSendWr().sge(addr, len, lkey);
        w.opcode = op;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.wrId = 7;
        return w;
    }

    /** An RC QP's init attributes on one CQ (and an SRQ, or null). */
    private static IbvQpInitAttr qpAttr(IbvCq cq, IbvSrq srq) {
        IbvQpInitAttr ia = new IbvQpInitAttr();
        ia.sendCq = cq;
        ia.recvCq = cq;
        ia.srq = srq;
        return ia;
    }

    private IbvWc one(IbvCq cq) {
        return Lab.await(cq, 1).get(0);
    }

    private void recv(Lab.End e, long addr, int len, long wrId) {
        IbvRecvWr r = new IbvRecvWr().sge(addr, len, e.mr.lkey());
        r.wrId = wrId;
        e.qp.postRecv(r);
    }

    // ------------------------------------------------------------------ operations

    @Test
    void rdmaWriteMovesBytesBetweenTwoDevices() {
        byte[] data = fill(a.buf, 65536, 1);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 65536, a.mr.lkey());
        w.remoteAddr = b.buf + 4096;
        w.rkey = b.mr.rkey();
        a.qp.postSend(w);
        IbvWc c = one(a.cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
        assertEquals(IbvWcOpcode.RDMA_WRITE, c.opcode);
        assertEquals(7, c.wrId);
        assertArrayEquals(data, read(b.buf + 4096, 65536));
    }

    @Test
    void sendWithImmediateAndMultipleSgesAndInline() {
        recv(b, b.buf, 1000, 11);
        byte[] x = fill(a.buf, 300, 2);
        byte[] y = fill(a.buf + 5000, 200, 3);
        IbvSendWr w = wr(IbvWrOpcode.SEND_WITH_IMM, a.buf, 300, a.mr.lkey());
        w.sgList = new IbvSge[] {new IbvSge(a.buf, 300, a.mr.lkey()), new IbvSge(a.buf + 5000, 200, a.mr.lkey())};
        w.numSge = 2;
        w.immData = 0x1234;
        a.qp.postSend(w);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        IbvWc r = one(b.cq);
        assertEquals(IbvWcOpcode.RECV, r.opcode);
        assertEquals(500, r.byteLen);
        assertEquals(0x1234, r.immData);
        assertTrue((r.wcFlags & IbvWc.WC_WITH_IMM) != 0);
        assertEquals(11, r.wrId);
        assertEquals(a.qp.qpNum(), r.srcQp);
        byte[] got = read(b.buf, 500);
        assertArrayEquals(x, java.util.Arrays.copyOfRange(got, 0, 300));
        assertArrayEquals(y, java.util.Arrays.copyOfRange(got, 300, 500));

        // inline: the buffer may change right after the post, the data sent is what was there
        recv(b, b.buf + 8192, 100, 12);
        byte[] z = fill(a.buf + 9000, 64, 4);
        IbvSendWr in = wr(IbvWrOpcode.SEND, a.buf + 9000, 64, 0xdead); // lkey not checked for inline data
        in.sendFlags |= IbvSendWr.SEND_INLINE;
        a.qp.postSend(in);
        fill(a.buf + 9000, 64, 99);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertEquals(64, one(b.cq).byteLen);
        assertArrayEquals(z, read(b.buf + 8192, 64));
    }

    @Test
    void rdmaReadAndAtomics() {
        byte[] remote = fill(b.buf + 12288, 4096, 5);
        IbvSendWr r = wr(IbvWrOpcode.RDMA_READ, a.buf + 8192, 4096, a.mr.lkey());
        r.remoteAddr = b.buf + 12288;
        r.rkey = b.mr.rkey();
        a.qp.postSend(r);
        IbvWc c = one(a.cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status);
        assertEquals(IbvWcOpcode.RDMA_READ, c.opcode);
        assertArrayEquals(remote, read(a.buf + 8192, 4096));

        lab.proc.writeLong(b.buf + 64, 5);
        IbvSendWr fa = wr(IbvWrOpcode.ATOMIC_FETCH_AND_ADD, a.buf + 128, 8, a.mr.lkey());
        fa.remoteAddr = b.buf + 64;
        fa.rkey = b.mr.rkey();
        fa.compareAdd = 3;
        a.qp.postSend(fa);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertEquals(5, lab.proc.readLong(a.buf + 128), "fetch-and-add returns the old value");
        assertEquals(8, lab.proc.readLong(b.buf + 64));

        IbvSendWr cs = wr(IbvWrOpcode.ATOMIC_CMP_AND_SWP, a.buf + 136, 8, a.mr.lkey());
        cs.remoteAddr = b.buf + 64;
        cs.rkey = b.mr.rkey();
        cs.compareAdd = 8;
        cs.swap = 42;
        a.qp.postSend(cs);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertEquals(8, lab.proc.readLong(a.buf + 136));
        assertEquals(42, lab.proc.readLong(b.buf + 64));
    }

    @Test
    void writeWithImmediateConsumesAReceive() {
        recv(b, b.buf, 16, 21);
        fill(a.buf, 2048, 6);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE_WITH_IMM, a.buf, 2048, a.mr.lkey());
        w.remoteAddr = b.buf + 65536;
        w.rkey = b.mr.rkey();
        w.immData = 77;
        a.qp.postSend(w);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        IbvWc r = one(b.cq);
        assertEquals(IbvWcOpcode.RECV_RDMA_WITH_IMM, r.opcode);
        assertEquals(77, r.immData);
        assertEquals(2048, r.byteLen);
    }

    @Test
    void unsignaledSendsCompleteSilently() {
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        w.sendFlags = 0;
        a.qp.postSend(w);
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.wrId = 8;
        a.qp.postSend(w);
        List<IbvWc> c = Lab.await(a.cq, 1);
        assertEquals(8, c.get(0).wrId);
        assertEquals(0, a.cq.poll(4, new IbvWc[] {new IbvWc()}), "the unsignaled one left no completion");
    }

    // ------------------------------------------------------------------ status codes

    private void assertFails(IbvSendWr w, IbvWcStatus expected) {
        a.qp.postSend(w);
        IbvWc c = one(a.cq);
        assertEquals(expected, c.status, c.toString());
        assertEquals(IbvQpState.ERR, a.qp.state(), "an error completion moves the QP to ERR");
        IbvSendWr next = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 8, a.mr.lkey());
        next.wrId = 99;
        a.qp.postSend(next);
        IbvWc f = one(a.cq);
        assertEquals(IbvWcStatus.WR_FLUSH_ERR, f.status, "later requests are flushed");
        assertEquals(99, f.wrId);
    }

    @Test
    void wrongLkeyIsALocalProtectionError() {
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey() + 1);
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        assertFails(w, IbvWcStatus.LOC_PROT_ERR);
    }

    @Test
    void wrongRkeyIsARemoteAccessError() {
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey() ^ 0x100;
        assertFails(w, IbvWcStatus.REM_ACCESS_ERR);
        assertEquals(IbvQpState.ERR, b.qp.state(), "an R_Key violation is a class C error: the responder goes to ERR too");
    }

    @Test
    void addressOutsideTheRemoteMrIsARemoteAccessError() {
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w.remoteAddr = b.buf + (1 << 20) - 32;
        w.rkey = b.mr.rkey();
        assertFails(w, IbvWcStatus.REM_ACCESS_ERR);
    }

    @Test
    void addressOutsideTheLocalMrIsALocalProtectionError() {
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf + (1 << 20) - 8, 64, a.mr.lkey());
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        assertFails(w, IbvWcStatus.LOC_PROT_ERR);
    }

    @Test
    void anMrOfAnotherPdIsALocalProtectionError() {
        IbvPd other = a.ctx.allocPd();
        IbvMr mr = other.regMr(a.buf, 4096, Lab.RW);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, mr.lkey());
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        assertFails(w, IbvWcStatus.LOC_PROT_ERR);
        mr.dereg();
        other.dealloc();
    }

    @Test
    void missingRemoteWriteRightIsARemoteAccessError() {
        IbvMr ro = b.pd.regMr(b.buf, 4096, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w.remoteAddr = b.buf;
        w.rkey = ro.rkey();
        assertFails(w, IbvWcStatus.REM_ACCESS_ERR);
        ro.dereg();
    }

    @Test
    void readIntoMemoryWithoutLocalWriteIsALocalProtectionError() {
        IbvMr ro = a.pd.regMr(a.buf, 4096, IbAccess.REMOTE_READ);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_READ, a.buf, 64, ro.lkey());
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        assertFails(w, IbvWcStatus.LOC_PROT_ERR);
        ro.dereg();
    }

    @Test
    void aMisalignedAtomicIsARemoteInvalidRequest() {
        IbvSendWr w = wr(IbvWrOpcode.ATOMIC_FETCH_AND_ADD, a.buf, 8, a.mr.lkey());
        w.remoteAddr = b.buf + 4;
        w.rkey = b.mr.rkey();
        assertFails(w, IbvWcStatus.REM_INV_REQ_ERR);
    }

    @Test
    void aReceiveBufferTooSmallIsALengthErrorOnBothSides() {
        recv(b, b.buf, 10, 31);
        IbvSendWr w = wr(IbvWrOpcode.SEND, a.buf, 100, a.mr.lkey());
        a.qp.postSend(w);
        assertEquals(IbvWcStatus.REM_INV_REQ_ERR, one(a.cq).status);
        IbvWc r = one(b.cq);
        assertEquals(IbvWcStatus.LOC_LEN_ERR, r.status);
        assertEquals(31, r.wrId);
    }

    /**
     * The port's hw_counters (mlx4's diag counters through DIAG_RPRT, the kernel's names and
     * order): RNR NAKs counted on both sides (sent by the responder's port, received by the
     * requester's), the retries-exceeded completion and the flushed one after it on the send queue.
     */
    @Test
    void theDiagCountersCountRnrNaksAndErrorCompletionsByQueue() {
        Mlx4Device da = lab.devs.get(0);
        Mlx4Device db = lab.devs.get(1);
        java.util.Map<String, Long> a0 = da.getHwStats(1);
        java.util.Map<String, Long> b0 = db.getHwStats(1);
        assertEquals(java.util.List.of(org.peerdirect.hca.cx3.ifc.DiagRprt.PORT_NAMES), java.util.List.copyOf(a0.keySet()),
                "diag_basic then diag_ext");
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.RTS;
        x.rnrRetry = 2;
        a.qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.RNR_RETRY);
        a.qp.postSend(wr(IbvWrOpcode.SEND, a.buf, 64, a.mr.lkey()));
        assertEquals(IbvWcStatus.RNR_RETRY_EXC_ERR, one(a.cq).status);
        IbvSendWr next = wr(IbvWrOpcode.SEND, a.buf, 8, a.mr.lkey());
        a.qp.postSend(next);
        assertEquals(IbvWcStatus.WR_FLUSH_ERR, one(a.cq).status);
        java.util.Map<String, Long> a1 = da.getHwStats(1);
        java.util.Map<String, Long> b1 = db.getHwStats(1);
        assertEquals(3, a1.get("sq_num_rnr") - a0.get("sq_num_rnr"), "RNR NAKs received: the first try and two retries");
        assertEquals(3, b1.get("rq_num_rnr") - b0.get("rq_num_rnr"), "RNR NAKs the responder sent");
        assertEquals(1, a1.get("sq_num_rree") - a0.get("sq_num_rree"), "one RNR retries exceeded completion");
        assertEquals(1, a1.get("sq_num_wrfe") - a0.get("sq_num_wrfe"), "one flushed send");
        assertEquals(0, a1.get("rq_num_rnr") - a0.get("rq_num_rnr"), "the requester's port sent none");
        assertEquals(0, a1.get("sq_num_rae") - a0.get("sq_num_rae"));
    }

    @Test
    void noReceivePostedEndsInRnrRetryExceeded() {
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.RTS;
        x.rnrRetry = 2;
        a.qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.RNR_RETRY);
        long naks = lab.machine.engine(0).rnrNaks();
        a.qp.postSend(wr(IbvWrOpcode.SEND, a.buf, 64, a.mr.lkey()));
        IbvWc c = one(a.cq);
        assertEquals(IbvWcStatus.RNR_RETRY_EXC_ERR, c.status);
        assertEquals(3, lab.machine.engine(0).rnrNaks() - naks, "the first try and two retries");
    }

    @Test
    void rnrRetryForeverDeliversOnceAReceiveIsPosted() throws Exception {
        a.qp.postSend(wr(IbvWrOpcode.SEND, a.buf, 64, a.mr.lkey()));
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (lab.machine.engine(0).rnrNaks() < 3) {
            assertTrue(System.nanoTime() < deadline, "RNR NAKs while no receive is posted");
            Thread.onSpinWait();
        }
        recv(b, b.buf, 64, 41);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertEquals(41, one(b.cq).wrId);
    }

    @Test
    void anUnreachablePeerEndsInTransportRetryExceeded() {
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.ERR;
        b.qp.modify(x, IbvQpAttr.STATE);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        a.qp.postSend(w);
        assertEquals(IbvWcStatus.RETRY_EXC_ERR, one(a.cq).status);
    }

    @Test
    void aFullCqOverrunsIntoError() {
        IbvCq small = a.ctx.createCq(2, null);
        IbvQp q = a.pd.createQp(qpAttr(small, null));
        Lab.End c = lab.new End(1, 1 << 16, IbvQpType.RC, Lab.RW);
        Lab.End a2 = lab.new End(lab, a, q, small);
        Lab.connect(a2, c, 1, 7, 4, 3);
        for (int i = 0; i < 3; i++) {
            IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
            w.remoteAddr = c.buf;
            w.rkey = c.mr.rkey();
            q.postSend(w);
        }
        assertEquals(-1, small.poll(4, new IbvWc[] {new IbvWc()}), "poll reports the CQ error");
        assertEquals(1, lab.machine.engine(0).cqOverruns());
        assertEquals(IbvQpState.ERR, q.state());
        q.destroy();
        small.destroy();
    }

    // ------------------------------------------------------------------ verbs errors

    @Test
    void postingBeforeRtsAndBadTransitionsAreEinval() {
        IbvQp q = a.pd.createQp(qpAttr(a.cq, null));
        PostException e = assertThrows(PostException.class, () -> q.postSend(wr(IbvWrOpcode.SEND, a.buf, 8, a.mr.lkey())));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("RESET"), e.getMessage());
        assertThrows(PostException.class, () -> q.postRecv(new IbvRecvWr().sge(a.buf, 8, a.mr.lkey())));
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.RTS;
        KernelException t = assertThrows(KernelException.class, () -> q.modify(x, IbvQpAttr.STATE));
        assertTrue(t.getMessage().contains("cannot move from RESET to RTS"), t.getMessage());
        x.qpState = IbvQpState.INIT;
        t = assertThrows(KernelException.class, () -> q.modify(x, IbvQpAttr.STATE | IbvQpAttr.PORT));
        assertTrue(t.getMessage().contains("missing"), t.getMessage());
        IbvSendWr many = wr(IbvWrOpcode.SEND, a.buf, 8, a.mr.lkey());
        many.sgList = new IbvSge[] {new IbvSge(), new IbvSge(), new IbvSge(), new IbvSge(), new IbvSge()};
        many.numSge = 5;
        e = assertThrows(PostException.class, () -> a.qp.postSend(many));
        assertSame(many, e.badWr());
        q.destroy();
        // ConnectX-3 has no ATOMIC WRITE (IBA 1.5): refused at post, not sent as something else
        IbvSendWr aw = wr(IbvWrOpcode.ATOMIC_WRITE, a.buf, 8, a.mr.lkey());
        aw.numSge = 0;
        aw.remoteAddr = b.buf;
        aw.rkey = b.mr.rkey();
        e = assertThrows(PostException.class, () -> a.qp.postSend(aw));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("mlx4 has no ATOMIC_WRITE"), e.getMessage());
        assertEquals(0, a.ctx.queryDeviceEx().deviceCapFlagsEx() & IbvDeviceAttr.DEVICE_ATOMIC_WRITE, "and does not report it");
        // nor RDMA FLUSH: refused at post; the FLUSH rights on an MR or a QP are EOPNOTSUPP in the core (ib_check_mr_access)
        IbvSendWr fl = wr(IbvWrOpcode.FLUSH, a.buf, 8, a.mr.lkey());
        fl.numSge = 0;
        fl.remoteAddr = b.buf;
        fl.rkey = b.mr.rkey();
        fl.flushType = IbvSendWr.FLUSH_GLOBAL;
        e = assertThrows(PostException.class, () -> a.qp.postSend(fl));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("mlx4 has no FLUSH"), e.getMessage());
        long flushCaps = IbvDeviceAttr.DEVICE_FLUSH_GLOBAL | IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT;
        assertEquals(0, a.ctx.queryDeviceEx().deviceCapFlagsEx() & flushCaps, "and does not report it");
        KernelException mr = assertThrows(KernelException.class, () -> a.pd.regMr(a.buf, 4096,
                org.peerdirect.ib.core.umem.IbAccess.LOCAL_WRITE | org.peerdirect.ib.core.umem.IbAccess.FLUSH_GLOBAL));
        assertEquals(Errno.EOPNOTSUPP, mr.errno());
        assertTrue(mr.getMessage().contains("global placement type"), mr.getMessage());
        org.peerdirect.ib.core.verbs.IbvQpAttr qa = new org.peerdirect.ib.core.verbs.IbvQpAttr();
        qa.qpAccessFlags = org.peerdirect.ib.core.umem.IbAccess.FLUSH_PERSISTENT;
        KernelException qp = assertThrows(KernelException.class, () -> a.qp.modify(qa, org.peerdirect.ib.core.verbs.IbvQpAttr.ACCESS_FLAGS));
        assertEquals(Errno.EOPNOTSUPP, qp.errno());
        assertTrue(qp.getMessage().contains("persistent placement type"), qp.getMessage());
    }

    @Test
    void theRequestsBeforeARefusedOneStillExecute() {
        IbvSendWr w1 = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w1.remoteAddr = b.buf;
        w1.rkey = b.mr.rkey();
        w1.wrId = 1;
        IbvSendWr w2 = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w2.remoteAddr = b.buf + 64;
        w2.rkey = b.mr.rkey();
        w2.wrId = 2;
        IbvSendWr bad = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        bad.opcode = null;
        w1.next = w2;
        w2.next = bad;
        PostException e = assertThrows(PostException.class, () -> a.qp.postSend(w1));
        assertSame(bad, e.badWr());
        List<IbvWc> c = Lab.await(a.cq, 2);
        assertEquals(1, c.get(0).wrId, "the doorbell was rung for the accepted requests");
        assertEquals(2, c.get(1).wrId);
    }

    @Test
    void aResetDiscardsAStalledRequestForGood() {
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.ERR;
        b.qp.modify(x, IbvQpAttr.STATE); // the peer is unreachable: a's request waits for retries
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        w.wrId = 1;
        a.qp.postSend(w);
        x.qpState = IbvQpState.RESET;
        a.qp.modify(x, IbvQpAttr.STATE);
        b.qp.modify(x, IbvQpAttr.STATE);
        // 2RST_QP gives the QP back to the driver: the device keeps no QP (and so no request) of it
        assertTrue(lab.machine.engine(0).qps().stream().noneMatch(q -> q.qpn() == a.qp.qpNum()), "the reset discarded the stalled request");
        assertEquals(IbvQpState.RESET, a.qp.query().qpState, "QUERY_QP: the QP is in RESET");
        Lab.connect(a, b, 1, 7, 4, 3);
        w.wrId = 2;
        a.qp.postSend(w);
        List<IbvWc> c = Lab.await(a.cq, 1);
        assertEquals(2, c.get(0).wrId, "only the new request completes: " + c);
        assertEquals(IbvWcStatus.SUCCESS, c.get(0).status);
    }

    /**
     * libmlx4's {@code mlx4_cq_clean} at the move to RESET: a completion the device wrote before
     * the reset (here a request's RETRY_EXC_ERR, not polled yet) is taken out of the CQ, so it is
     * not polled after the reset under the work-request id the new life put at the same WQE index.
     */
    @Test
    void aResetCleansItsCompletionsOutOfTheCq() {
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.ERR;
        b.qp.modify(x, IbvQpAttr.STATE); // nothing answers: a's request ends in RETRY_EXC_ERR after its retries
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        w.wrId = 1;
        a.qp.postSend(w);
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (lab.hwQp(0, a.qp).outstandingSends() != 0) { // the device consumed it: its error CQE is in a's ring, unpolled
            assertTrue(System.nanoTime() < deadline, "the request did not end within 20 s");
            Thread.onSpinWait();
        }
        x.qpState = IbvQpState.RESET;
        a.qp.modify(x, IbvQpAttr.STATE);
        b.qp.modify(x, IbvQpAttr.STATE);
        Lab.connect(a, b, 1, 7, 4, 3);
        w.wrId = 2;
        a.qp.postSend(w); // WQE index 0 again
        List<IbvWc> c = Lab.await(a.cq, 1);
        assertEquals(2, c.get(0).wrId, c.toString());
        assertEquals(IbvWcStatus.SUCCESS, c.get(0).status, "the old life's RETRY_EXC_ERR was cleaned out: " + c);
        assertEquals(0, a.cq.poll(1, new IbvWc[] {new IbvWc()}), "nothing else in the CQ");
    }

    @Test
    void aDriverUnbindWakesChannelWaitersWithEio() throws Exception {
        IbvCompChannel ch = b.ctx.createCompChannel();
        IbvCq cq = b.ctx.createCq(4, ch);
        cq.reqNotify(false);
        java.util.concurrent.atomic.AtomicReference<Throwable> got = new java.util.concurrent.atomic.AtomicReference<>();
        Thread t = Thread.ofPlatform().start(() -> {
            try {
                ch.getCqEvent(Duration.ofSeconds(60));
            } catch (Throwable e) {
                got.set(e);
            }
        });
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (t.getState() != Thread.State.TIMED_WAITING) {
            assertTrue(System.nanoTime() < deadline, "waiter blocked");
            Thread.onSpinWait();
        }
        lab.remove(1, false); // driver unbind: the hardware stays, the objects die
        t.join(10_000);
        assertTrue(!t.isAlive(), "the waiter woke up");
        assertTrue(got.get() instanceof KernelException k && k.errno() == Errno.EIO, String.valueOf(got.get()));
    }

    @Test
    void closingAContextDestroysWhatItsUserLeft() {
        int before = lab.machine.engine(0).cqCount();
        org.peerdirect.ib.core.verbs.IbvContext c = lab.ib.get(0).open(lab.proc);
        IbvCq cq = c.createCq(8, c.createCompChannel());
        IbvPd pd = c.allocPd();
        pd.createQp(qpAttr(cq, null));
        pd.regMr(a.buf, 4096, Lab.RW);
        assertEquals(before + 1, lab.machine.engine(0).cqCount());
        c.close();
        assertEquals(before, lab.machine.engine(0).cqCount(), "the CQ went with the context");
    }

    @Test
    void mrAccessChecksAndNoOnDemandPagingOnMlx4() {
        KernelException e = assertThrows(KernelException.class, () -> a.pd.regMr(a.buf, 4096, IbAccess.REMOTE_WRITE));
        assertEquals(Errno.EINVAL, e.errno());
        e = assertThrows(KernelException.class, () -> a.pd.regMr(a.buf, 4096, IbAccess.LOCAL_WRITE | IbAccess.ON_DEMAND));
        assertEquals(Errno.EOPNOTSUPP, e.errno());
        assertTrue(e.getMessage().contains("Operation not supported"), e.getMessage());
        assertEquals(0, a.ctx.queryDeviceEx().odpCaps().generalCaps(), "no ODP capability on mlx4");
        e = assertThrows(KernelException.class, () -> a.pd.adviseMr(org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_ADVICE_PREFETCH,
                org.peerdirect.ib.core.verbs.IbvPd.ADVISE_MR_FLAG_FLUSH, new org.peerdirect.ib.core.verbs.IbvSge(a.buf, 4096, 1)));
        assertEquals(Errno.EOPNOTSUPP, e.errno(), "mlx4 has no advise_mr: " + e.getMessage());
        assertEquals(0x02c9, a.ctx.queryDevice().vendorId(), "vendor_id is the Mellanox OUI");
        assertEquals(4099, a.ctx.queryDevice().vendorPartId());
    }

    // ------------------------------------------------------------------ UD, SRQ, channels

    @Test
    void udDatagramsCarryAGrhOnlyFromAGlobalAddress() {
        Lab.End u = lab.new End(0, 1 << 16, IbvQpType.UD, Lab.RW);
        Lab.End v = lab.new End(1, 1 << 16, IbvQpType.UD, Lab.RW);
        for (Lab.End e : List.of(u, v)) {
            IbvQpAttr x = new IbvQpAttr();
            x.qpState = IbvQpState.INIT;
            x.qkey = 0x11111111;
            e.qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT | IbvQpAttr.QKEY);
            x.qpState = IbvQpState.RTR;
            e.qp.modify(x, IbvQpAttr.STATE);
            x.qpState = IbvQpState.RTS;
            e.qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.SQ_PSN);
        }
        // a LID-only address (no GRH, as inside an InfiniBand subnet): the datagram carries no GRH,
        // so the receive buffer's first 40 bytes stay as they were, but byte_len still counts them
        // (IPoIB pulls IB_GRH_BYTES from every UD receive whether or not IB_WC_GRH is set)
        recv(v, v.buf, 40 + 200, 51);
        byte[] marker = fill(v.buf, 40, 99);
        byte[] d = fill(u.buf, 200, 7);
        IbvAh ah = u.pd.createAh(v.lid, 1);
        IbvSendWr w = wr(IbvWrOpcode.SEND, u.buf, 200, u.mr.lkey());
        w.ah = ah;
        w.remoteQpn = v.qp.qpNum();
        w.remoteQkey = 0x11111111;
        u.qp.postSend(w);
        assertEquals(IbvWcStatus.SUCCESS, one(u.cq).status);
        IbvWc r = one(v.cq);
        assertEquals(240, r.byteLen, "payload plus the 40 bytes reserved for a GRH");
        assertEquals(0, r.wcFlags & IbvWc.WC_GRH, "no GRH on the wire, no IBV_WC_GRH");
        assertArrayEquals(marker, read(v.buf, 40), "the GRH area is left alone when no GRH arrived");
        assertEquals(u.qp.qpNum(), r.srcQp);
        assertEquals(u.lid, r.slid);
        assertArrayEquals(d, read(v.buf + 40, 200));
        // a global address (is_global, the destination GID): the GRH rides along and is delivered
        org.peerdirect.ib.core.verbs.IbvAhAttr global = org.peerdirect.ib.core.verbs.IbvAhAttr.gid(
                org.peerdirect.ib.core.verbs.IbvGid.parse(v.ctx.queryGid(1, 0)), 0, 1);
        global.dlid = v.lid;
        IbvAh gah = u.pd.createAh(global);
        recv(v, v.buf, 40 + 200, 53);
        w.ah = gah;
        u.qp.postSend(w);
        assertEquals(IbvWcStatus.SUCCESS, one(u.cq).status);
        r = one(v.cq);
        assertEquals(240, r.byteLen);
        assertTrue((r.wcFlags & IbvWc.WC_GRH) != 0, "IBV_WC_GRH");
        assertEquals(0x60, read(v.buf, 1)[0] & 0xF0, "IP version 6 in the GRH");
        assertArrayEquals(d, read(v.buf + 40, 200));
        gah.destroy();
        w.ah = ah;
        // no GRH into a receive of three SGEs (16 + 24 + 200 bytes): the 40 reserved bytes span
        // the first two, left untouched, and the payload starts at the third
        long sg = v.buf + 8192;
        byte[] before = fill(sg, 40, 98);
        IbvRecvWr three = new IbvRecvWr();
        three.sgList = new org.peerdirect.ib.core.verbs.IbvSge[] {new org.peerdirect.ib.core.verbs.IbvSge(), new org.peerdirect.ib.core.verbs.IbvSge(),
                new org.peerdirect.ib.core.verbs.IbvSge()};
        three.sgList[0].set(sg, 16, v.mr.lkey());
        three.sgList[1].set(sg + 16, 24, v.mr.lkey());
        three.sgList[2].set(sg + 4096, 200, v.mr.lkey());
        three.numSge = 3;
        three.wrId = 54;
        v.qp.postRecv(three);
        u.qp.postSend(w);
        assertEquals(IbvWcStatus.SUCCESS, one(u.cq).status);
        r = one(v.cq);
        assertEquals(240, r.byteLen);
        assertEquals(0, r.wcFlags & IbvWc.WC_GRH);
        assertArrayEquals(before, read(sg, 40), "the two SGEs of the GRH area are untouched");
        assertArrayEquals(d, read(sg + 4096, 200), "the payload in the third SGE");
        // wrong Q_Key: dropped silently; too long: local length error
        recv(v, v.buf, 240, 52);
        w.remoteQkey = 0x2222;
        u.qp.postSend(w);
        assertEquals(IbvWcStatus.SUCCESS, one(u.cq).status);
        assertEquals(0, v.cq.poll(1, new IbvWc[] {new IbvWc()}), "a datagram with a wrong Q_Key is dropped");
        IbvSendWr big = wr(IbvWrOpcode.SEND, u.buf, 8192, u.mr.lkey());
        big.ah = ah;
        big.remoteQpn = v.qp.qpNum();
        u.qp.postSend(big);
        assertEquals(IbvWcStatus.LOC_LEN_ERR, one(u.cq).status, "UD messages are at most one MTU");
    }

    @Test
    void srqReceivesForItsQps() {
        IbvSrq srq = b.pd.createSrq(16, 1);
        IbvQp q = b.pd.createQp(qpAttr(b.cq, srq));
        Lab.End c = lab.new End(0, 1 << 16, IbvQpType.RC, Lab.RW);
        Lab.End bs = lab.new End(lab, b, q, b.cq);
        Lab.connect(c, bs, 1, 7, 4, 3);
        assertThrows(PostException.class, () -> q.postRecv(new IbvRecvWr().sge(b.buf, 8, b.mr.lkey())));
        IbvRecvWr r = new IbvRecvWr().sge(b.buf + 4096, 128, b.mr.lkey());
        r.wrId = 61;
        srq.postRecv(r);
        fill(c.buf, 100, 8);
        c.qp.postSend(wr(IbvWrOpcode.SEND, c.buf, 100, c.mr.lkey()));
        assertEquals(IbvWcStatus.SUCCESS, one(c.cq).status);
        IbvWc w = one(b.cq);
        assertEquals(61, w.wrId);
        assertEquals(q.qpNum(), w.qpNum);
        q.destroy();
        srq.destroy();
    }

    @Test
    void completionChannelsWakeTheWaiter() throws Exception {
        IbvCompChannel ch = b.ctx.createCompChannel();
        IbvCq cq = b.ctx.createCq(16, ch);
        IbvQp q = b.pd.createQp(qpAttr(cq, null));
        Lab.End c = lab.new End(0, 1 << 16, IbvQpType.RC, Lab.RW);
        Lab.End bq = lab.new End(lab, b, q, cq);
        Lab.connect(c, bq, 1, 7, 4, 3);
        cq.reqNotify(false);
        assertNull(ch.getCqEvent(Duration.ofMillis(1)), "nothing yet");
        IbvRecvWr r = new IbvRecvWr().sge(b.buf, 64, b.mr.lkey());
        q.postRecv(r);
        c.qp.postSend(wr(IbvWrOpcode.SEND, c.buf, 64, c.mr.lkey()));
        assertSame(cq, ch.getCqEvent(Duration.ofSeconds(10)));
        ch.ackCqEvents(cq, 1);
        assertEquals(1, Lab.await(cq, 1).size());
        q.destroy();
        cq.destroy();
        ch.destroy();
    }

    /**
     * {@code mlx4_cq_arm} writes the consumer index with the arm: a CQE that landed after the
     * last poll and before the arm is an event at once (the device compares the index with its
     * producer counter), never a wake-up lost until the next completion.
     */
    @Test
    void aCqeThatLandedBeforeTheArmIsAnEventAtOnce() throws Exception {
        IbvCompChannel ch = b.ctx.createCompChannel();
        IbvCq cq = b.ctx.createCq(16, ch);
        IbvQp q = b.pd.createQp(qpAttr(cq, null));
        Lab.End c = lab.new End(0, 1 << 16, IbvQpType.RC, Lab.RW);
        Lab.End bq = lab.new End(lab, b, q, cq);
        Lab.connect(c, bq, 1, 7, 4, 3);
        q.postRecv(new IbvRecvWr().sge(b.buf, 64, b.mr.lkey()));
        c.qp.postSend(wr(IbvWrOpcode.SEND, c.buf, 64, c.mr.lkey()));
        assertEquals(1, Lab.await(c.cq, 1).size(), "sent: the receive CQE is written before the send's ACK");
        cq.reqNotify(false); // nothing polled since: the receive CQE is past the consumer index
        assertSame(cq, ch.getCqEvent(Duration.ofSeconds(10)), "the waiting CQE fired the arm");
        ch.ackCqEvents(cq, 1);
        assertEquals(1, Lab.await(cq, 1).size());
        cq.reqNotify(false);
        assertNull(ch.getCqEvent(Duration.ofMillis(20)), "everything polled: no event");
        q.destroy();
        cq.destroy();
        ch.destroy();
    }

    // ------------------------------------------------------------------ peer memory and removal

    @Test
    void peerMemoryMrThenInvalidationTurnsIntoErrorsNeverStrayWrites() {
        ExamplePeerMemory gpu = new ExamplePeerMemory(lab.mm, "example_peer", 65536, false);
        lab.core.peerMemory().register(gpu, true);
        long dev = gpu.alloc(lab.proc.pid(), 1 << 20);
        IbvMr pm = b.pd.regMr(dev, 1 << 20, Lab.RW);
        assertTrue(pm.isPeer());
        byte[] d = fill(a.buf, 8192, 9);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 8192, a.mr.lkey());
        w.remoteAddr = dev + 100;
        w.rkey = pm.rkey();
        a.qp.postSend(w);
        assertEquals(IbvWcStatus.SUCCESS, one(a.cq).status);
        assertArrayEquals(d, read(dev + 100, 8192), "the device memory got the bytes");

        assertEquals(1, gpu.invalidate(lab.proc.pid(), dev));
        assertTrue(pm.invalidated());
        byte[] before = read(dev, 1 << 16);
        fill(a.buf, 8192, 10);
        a.qp.postSend(w);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, one(a.cq).status, "the revoked key gives an access error");
        assertArrayEquals(before, read(dev, 1 << 16), "no stray write");
        pm.dereg(); // only the cleanup
        gpu.free(lab.proc.pid(), dev);
    }

    @Test
    void deviceRemovalFlushesRevokesAndFailsLaterVerbs() {
        recv(b, b.buf, 64, 71);
        recv(b, b.buf, 64, 72);
        lab.remove(1, true);
        List<IbvWc> flushed = Lab.await(b.cq, 2);
        assertEquals(IbvWcStatus.WR_FLUSH_ERR, flushed.get(0).status);
        assertEquals(72, flushed.get(1).wrId);
        assertEquals(IbvQpState.ERR, b.qp.state());
        KernelException e = assertThrows(KernelException.class, () -> b.pd.regMr(b.buf, 4096, Lab.RW));
        assertEquals(Errno.EIO, e.errno());
        assertTrue(e.getMessage().contains("mlx4_1 was removed"), e.getMessage());
        assertThrows(KernelException.class, () -> b.qp.postSend(wr(IbvWrOpcode.SEND, b.buf, 8, b.mr.lkey())));
        assertEquals(0, lab.devs.get(1).dma().mappedPages(), "its MRs gave their memory back");
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey());
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        a.qp.postSend(w);
        assertEquals(IbvWcStatus.RETRY_EXC_ERR, one(a.cq).status, "the peer is gone from the fabric");
    }
}
