package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpOpenAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.ib.core.verbs.IbvSrqAttr;
import org.peerdirect.ib.core.verbs.IbvSrqInitAttrEx;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.IbvXrcd;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.rdma.RcConnect;

/**
 * XRC on mlx5 against two ConnectX-4 models: XRC domains ({@code ALLOC_XRCD}), XRC SRQs
 * ({@code CREATE_XRC_SRQ}), XRC send QPs (st XRC with the XRC segment after the control segment)
 * and XRC receive QPs (st XRC, {@code no_sq}). One send QP reaches every XRC SRQ of the target's
 * domain by naming it in each request; the receive completes to that SRQ's CQ with the target
 * QP's number; RDMA is checked against the named SRQ's PD. Every test ends with the machine's
 * leak and IOMMU checks.
 */
class Mlx5XrcTest extends Mlx5Machine {

    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC;
    static final int LEN = 64 << 10;

    @TempDir
    Path tmp;

    @BeforeEach
    void up() {
        startMachine(tmp, "xrc-app", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
    }

    @AfterEach
    void down() {
        assertEquals(List.of(), stopMachine(), "every DMA page freed, no page with the firmware, IOMMU clean, every frame free");
    }

    /** The receiving side: a domain, a CQ, two XRC SRQs in it (each over its own buffer) and an XRC receive QP. */
    final class Target {
        final IbvContext ctx;
        final IbvPd pd;
        final IbvXrcd xrcd;
        final IbvCq cq;
        final IbvSrq[] srqs = new IbvSrq[2];
        final IbvQp qp;
        final long buf;
        final IbvMr mr;

        Target(int dev, int access) {
            ctx = devs.get(dev).open(proc);
            pd = ctx.allocPd();
            xrcd = ctx.openXrcd(-1, 0);
            cq = ctx.createCq(256, null);
            for (int i = 0; i < 2; i++) {
                IbvSrqInitAttrEx s = new IbvSrqInitAttrEx();
                s.srqType = IbvSrqInitAttrEx.SrqType.XRC;
                s.pd = pd;
                s.xrcd = xrcd;
                s.cq = cq;
                s.maxWr = 64;
                s.maxSge = 1;
                srqs[i] = ctx.createSrqEx(s);
            }
            IbvQpInitAttr q = new IbvQpInitAttr();
            q.qpType = IbvQpType.XRC_RECV;
            q.xrcd = xrcd;
            qp = ctx.createQpEx(q);
            buf = proc.mmap(4 * LEN);
            proc.populate(buf, 4 * LEN, true);
            mr = pd.regMr(buf, 4 * LEN, access);
        }

        /** A receive into SRQ {@code i}'s own quarter of the buffer, at offset {@code off} in it. */
        void postRecv(int i, long wrId, int off, int len) {
            IbvRecvWr r = new IbvRecvWr().sge(buf + (long) i * LEN + off, len, mr.lkey());
            r.wrId = wrId;
            srqs[i].postRecv(r);
        }
    }

    /** The sending side: a PD, a CQ and one XRC send QP. */
    final class Initiator {
        final IbvContext ctx;
        final IbvPd pd;
        final IbvCq cq;
        final IbvQp qp;
        final long buf;
        final IbvMr mr;

        Initiator(int dev, int access) {
            ctx = devs.get(dev).open(proc);
            pd = ctx.allocPd();
            cq = ctx.createCq(256, null);
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.qpType = IbvQpType.XRC_SEND;
            a.sendCq = cq;
            a.maxSendWr = 64;
            a.maxSendSge = 1;
            a.maxInlineData = 64;
            qp = pd.createQp(a);
            buf = proc.mmap(LEN);
            proc.populate(buf, LEN, true);
            mr = pd.regMr(buf, LEN, access);
        }
    }

    static void connect(Initiator i, Target t, int timeout, int retries) {
        int iLid = i.ctx.queryPort(1).lid();
        int tLid = t.ctx.queryPort(1).lid();
        new RcConnect().access(RW).minRnrTimer(1).timeout(timeout, retries).connect(i.qp, tLid, t.qp.qpNum());
        new RcConnect().access(RW).minRnrTimer(1).timeout(timeout, retries).connect(t.qp, iLid, i.qp.qpNum());
    }

    static IbvWc one(IbvCq cq) {
        return Mlx5VerbsTest.one(cq);
    }

    static IbvSendWr wr(IbvWrOpcode op, long addr, int len, int lkey, long id, int srqn) {
        IbvSendWr w = new IbvSendWr().sge(addr, len, lkey);
        w.opcode = op;
        w.wrId = id;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.remoteSrqn = srqn;
        return w;
    }

    @Test
    void oneSendQpReachesEachXrcSrqItNamesAndTheReceiveCompletesToThatSrqsCq() {
        Target t = new Target(1, RW);
        Initiator i = new Initiator(0, RW);
        assertTrue((i.ctx.queryDevice().deviceCapFlags() & IbvDeviceAttr.DEVICE_XRC) != 0, "the ConnectX-4 reports IBV_DEVICE_XRC");
        connect(i, t, 14, 7);
        assertEquals(IbvQpState.RTS, t.qp.query().qpState);
        int srqA = t.srqs[0].srqNum();
        int srqB = t.srqs[1].srqNum();
        assertNotEquals(srqA, srqB);
        for (int round = 0; round < 8; round++) {
            t.postRecv(0, 100 + round, 4096 * round, 4096);
            t.postRecv(1, 200 + round, 4096 * round, 4096);
        }
        for (int round = 0; round < 8; round++) {
            int which = round % 2;
            byte[] data = fill(i.buf + 4096 * round, 1000 + round, round);
            i.qp.postSend(wr(IbvWrOpcode.SEND, i.buf + 4096 * round, data.length, i.mr.lkey(), round, which == 0 ? srqA : srqB));
            IbvWc s = one(i.cq);
            assertEquals(IbvWcStatus.SUCCESS, s.status, s.toString());
            assertEquals(round, s.wrId);
            IbvWc r = one(t.cq);
            assertEquals(IbvWcStatus.SUCCESS, r.status, r.toString());
            assertEquals(IbvWcOpcode.RECV, r.opcode);
            assertEquals(t.qp.qpNum(), r.qpNum, "the receive completion names the XRC receive QP");
            // each SRQ consumes its receives in order: the round-th message to SRQ x is its (round/2)-th receive
            assertEquals((which == 0 ? 100 : 200) + round / 2, r.wrId, "the WQE of the SRQ the sender named");
            assertEquals(data.length, r.byteLen);
            assertArrayEquals(data, read(t.buf + (long) which * LEN + 4096L * (round / 2), data.length), "data in that SRQ's buffer");
        }
        // RDMA through XRC: the rkey is checked against the named SRQ's PD
        byte[] w = fill(i.buf, 512, 77);
        IbvSendWr write = wr(IbvWrOpcode.RDMA_WRITE, i.buf, 512, i.mr.lkey(), 50, srqA);
        write.remoteAddr = t.buf + 3 * LEN;
        write.rkey = t.mr.rkey();
        i.qp.postSend(write);
        assertEquals(IbvWcStatus.SUCCESS, one(i.cq).status);
        assertArrayEquals(w, read(t.buf + 3 * LEN, 512));
        IbvSendWr readBack = wr(IbvWrOpcode.RDMA_READ, i.buf + 8192, 512, i.mr.lkey(), 51, srqB);
        readBack.remoteAddr = t.buf + 3 * LEN;
        readBack.rkey = t.mr.rkey();
        i.qp.postSend(readBack);
        assertEquals(IbvWcStatus.SUCCESS, one(i.cq).status);
        assertArrayEquals(w, read(i.buf + 8192, 512));
        // an MR of another PD than the SRQ's: remote access error, as an rkey of another PD on RC
        IbvPd other = t.ctx.allocPd();
        IbvMr foreign = other.regMr(t.buf, LEN, RW);
        IbvSendWr bad = wr(IbvWrOpcode.RDMA_WRITE, i.buf, 64, i.mr.lkey(), 52, srqA);
        bad.remoteAddr = t.buf;
        bad.rkey = foreign.rkey();
        i.qp.postSend(bad);
        IbvWc e = one(i.cq);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, e.status, e.toString());
        foreign.dereg();
        other.dealloc();
        t.ctx.close();
        i.ctx.close();
    }

    /** {@code rdma:xsrq_pingpong}: three clients' messages all reach the server's one XRC SRQ, each through its own receive QP; with -o over ODP. */
    @Test
    void xsrqPingpongFeedsOneServerSrqFromEveryClient() throws Exception {
        String out = tools().xsrq_pingpong("-d", "mlx5_0", "-c", "3", "-n", "10");
        assertTrue(out.contains("validated 60 received buffers") && out.contains("[10, 10, 10]"), out);
        String odp = tools().xsrq_pingpong("-d", "mlx5_1", "-o", "-n", "5");
        assertTrue(odp.contains("ODP") && odp.contains("validated 20 received buffers") && odp.contains("[5, 5]"), odp);
    }

    /**
     * XRC over on-demand paging (issue 12): both sides' buffers are ODP MRs dropped with
     * {@code madvise(DONTNEED)} before every iteration, so each SEND into an XRC SRQ (the
     * responder's WQE fault names the XRC SRQ), RDMA WRITE, RDMA READ and fetch-and-add through
     * the XRC pair faults its pages back in on both devices; the data is checked every time.
     */
    @Test
    void everyXrcOperationWorksOverOdpMemoryDroppedBeforeEachIteration() {
        int odp = RW | IbAccess.ON_DEMAND;
        Target t = new Target(1, odp);
        Initiator i = new Initiator(0, odp);
        connect(i, t, 14, 7);
        int srqn = t.srqs[1].srqNum();
        int iterations = Integer.getInteger("peerdirect.odp.iterations", 12);
        for (int it = 0; it < iterations; it++) {
            proc.madvise(t.buf, 4 * LEN, AddressSpace.Advice.MADV_DONTNEED);
            proc.madvise(i.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            t.postRecv(1, it, 0, 4096);
            byte[] data = fill(i.buf, 3000, it); // present for the CPU now, not for the NIC: the send still faults
            i.qp.postSend(wr(IbvWrOpcode.SEND, i.buf, 3000, i.mr.lkey(), 1, srqn));
            assertEquals(IbvWcStatus.SUCCESS, one(i.cq).status, "iteration " + it);
            IbvWc r = one(t.cq);
            assertEquals(IbvWcStatus.SUCCESS, r.status, "iteration " + it + ": " + r);
            assertEquals(it, r.wrId);
            assertArrayEquals(data, read(t.buf + LEN, 3000), "iteration " + it + ": SEND into the XRC SRQ's faulting buffer");
            byte[] w = fill(i.buf + 8192, 2000, it + 50);
            IbvSendWr write = wr(IbvWrOpcode.RDMA_WRITE, i.buf + 8192, 2000, i.mr.lkey(), 2, srqn);
            write.remoteAddr = t.buf + 3 * LEN + 100;
            write.rkey = t.mr.rkey();
            i.qp.postSend(write);
            assertEquals(IbvWcStatus.SUCCESS, one(i.cq).status, "iteration " + it + ": WRITE");
            assertArrayEquals(w, read(t.buf + 3 * LEN + 100, 2000));
            proc.madvise(i.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            IbvSendWr rd = wr(IbvWrOpcode.RDMA_READ, i.buf + 16384, 2000, i.mr.lkey(), 3, srqn);
            rd.remoteAddr = t.buf + 3 * LEN + 100;
            rd.rkey = t.mr.rkey();
            i.qp.postSend(rd);
            assertEquals(IbvWcStatus.SUCCESS, one(i.cq).status, "iteration " + it + ": READ");
            assertArrayEquals(w, read(i.buf + 16384, 2000));
            IbvSendWr fa = wr(IbvWrOpcode.ATOMIC_FETCH_AND_ADD, i.buf + 24576, 8, i.mr.lkey(), 4, srqn);
            fa.remoteAddr = t.buf + 2 * LEN;
            fa.rkey = t.mr.rkey();
            fa.compareAdd = 5;
            i.qp.postSend(fa);
            assertEquals(IbvWcStatus.SUCCESS, one(i.cq).status, "iteration " + it + ": FETCH_ADD");
            assertEquals(0L, java.nio.ByteBuffer.wrap(read(i.buf + 24576, 8)).getLong(), "the word was dropped: it reads 0 before the add");
        }
        Mlx5OdpMr tm = ibs.get(1).odpIfStarted().odpMkey(t.mr.lkey(), Mlx5OdpMr.class);
        Mlx5OdpMr im = ibs.get(0).odpIfStarted().odpMkey(i.mr.lkey(), Mlx5OdpMr.class);
        assertTrue(tm.stats().pageFaultsHandled.get() >= 3L * iterations, "the target's MR faulted in every iteration: " + tm.counters());
        assertTrue(im.stats().pageFaultsHandled.get() >= 3L * iterations, "the initiator's MR faulted in every iteration: " + im.counters());
        t.ctx.close();
        i.ctx.close();
    }

    /**
     * A request naming an SRQ that does not exist, is a basic SRQ, or belongs to another XRC
     * domain is dropped by the target (as the XRC rxe series does: no NAK is defined for it), so
     * the sender ends in a transport retry error; nothing is received anywhere.
     */
    /**
     * {@code ibv_modify_srq} of an XRC SRQ's limit: mlx5_ib arms it with {@code ARM_XRC_SRQ} and
     * op_mod 1 ({@code MLX5_ARM_XRC_SRQ_IN_OP_MOD_XRC_SRQ}), as {@code arm_xrc_srq_cmd} does; the
     * model refused every {@code ARM_XRC_SRQ} (its op_mod check let only {@code ARM_RQ} carry one).
     */
    @Test
    void anXrcSrqIsArmedByArmXrcSrq() {
        Target t = new Target(1, RW);
        for (int k = 0; k < 4; k++) {
            t.postRecv(0, k, k * 64, 64);
        }
        assertEquals(0, t.srqs[0].query().srqLimit, "a new XRC SRQ is not armed");
        t.srqs[0].modify(new IbvSrqAttr(0, 0, 2), IbvSrqAttr.LIMIT);
        assertEquals(2, t.srqs[0].query().srqLimit, "armed at 2 by ARM_XRC_SRQ");
        assertEquals(0, t.srqs[1].query().srqLimit, "the other XRC SRQ is not armed");
    }

    @Test
    void aRequestNamingAnSrqOutsideTheTargetsDomainIsDroppedAndTheSenderRetriesOut() {
        Target t = new Target(1, RW);
        Target otherDomain = new Target(1, RW);
        IbvSrq basic = t.pd.createSrq(8, 1);
        Initiator i = new Initiator(0, RW);
        connect(i, t, 8, 1); // ~1 ms ACK timeout, one retry
        t.postRecv(0, 1, 0, 4096);
        otherDomain.postRecv(0, 2, 0, 4096);
        IbvRecvWr br = new IbvRecvWr().sge(t.buf, 4096, t.mr.lkey());
        basic.postRecv(br);
        fill(i.buf, 100, 3);
        for (int srqn : new int[] {otherDomain.srqs[0].srqNum(), basic.srqNum(), 0xfff0}) {
            Initiator s = srqn == otherDomain.srqs[0].srqNum() ? i : new Initiator(0, RW);
            if (s != i) {
                connectFresh(s, t);
            }
            s.qp.postSend(wr(IbvWrOpcode.SEND, s.buf, 100, s.mr.lkey(), srqn, srqn));
            IbvWc e = one(s.cq);
            assertEquals(IbvWcStatus.RETRY_EXC_ERR, e.status, "srqn 0x" + Integer.toHexString(srqn) + ": " + e);
            s.ctx.close();
        }
        IbvWc[] none = {new IbvWc()};
        assertEquals(0, t.cq.poll(1, none), "nothing received in the target's domain");
        assertEquals(0, otherDomain.cq.poll(1, none), "nothing received in the other domain");
        basic.destroy();
        t.ctx.close();
        otherDomain.ctx.close();
    }

    /** The target's QP was connected to the first initiator: a new one gets a new receive QP in the same domain. */
    private void connectFresh(Initiator s, Target t) {
        IbvQpInitAttr q = new IbvQpInitAttr();
        q.qpType = IbvQpType.XRC_RECV;
        q.xrcd = t.xrcd;
        IbvQp tq = t.ctx.createQpEx(q);
        new RcConnect().access(RW).minRnrTimer(1).timeout(8, 1).connect(s.qp, t.ctx.queryPort(1).lid(), tq.qpNum());
        new RcConnect().access(RW).minRnrTimer(1).timeout(8, 1).connect(tq, s.ctx.queryPort(1).lid(), s.qp.qpNum());
    }

    /**
     * The uverbs rules: a domain in use cannot be closed (EBUSY) and nothing changes; an XRC
     * receive QP has no PD and takes no posts; an XRC SRQ needs a CQ and a domain of its own
     * context; a file descriptor shares one domain between contexts (O_CREAT, O_EXCL, EAGAIN,
     * EBADF as ib_uverbs_open_xrcd).
     */
    @Test
    void xrcDomainsFollowTheUverbsRules() throws Exception {
        Target t = new Target(1, RW);
        KernelException busy = assertThrows(KernelException.class, t.xrcd::close);
        assertTrue(busy.getMessage().contains("still used by 3"), busy.getMessage());
        IbvRecvWr r = new IbvRecvWr().sge(t.buf, 64, t.mr.lkey());
        assertThrows(KernelException.class, () -> t.qp.postRecv(r), "an XRC receive QP has no receive queue");
        assertThrows(KernelException.class, () -> t.qp.postSend(new IbvSendWr()), "nor a send queue");
        IbvQpInitAttr noPd = new IbvQpInitAttr();
        noPd.qpType = IbvQpType.XRC_RECV;
        assertThrows(KernelException.class, () -> t.pd.createQp(noPd), "an XRC receive QP is not created on a PD");
        assertThrows(KernelException.class, () -> t.ctx.createQpEx(noPd), "nor without a domain");
        IbvSrqInitAttrEx noCq = new IbvSrqInitAttrEx();
        noCq.srqType = IbvSrqInitAttrEx.SrqType.XRC;
        noCq.pd = t.pd;
        noCq.xrcd = t.xrcd;
        assertThrows(KernelException.class, () -> t.ctx.createSrqEx(noCq), "an XRC SRQ needs a CQ");
        assertThrows(KernelException.class, () -> t.ctx.openXrcd(-1, 01000), "oflags other than O_CREAT|O_EXCL");

        // sharing through a file: two contexts (here of two processes) opening the same file have one domain
        AddressSpace other = mm.createProcess("xrc-peer");
        AutoCloseable file = () -> { };
        int fdA = proc.installFd(file);
        int fdB = other.installFd(file);
        IbvContext b = devs.get(1).open(other);
        KernelException again = assertThrows(KernelException.class, () -> t.ctx.openXrcd(fdA, 0));
        assertEquals(KernelException.Errno.EAGAIN, again.errno(), "no domain yet and no O_CREAT");
        IbvXrcd xa = t.ctx.openXrcd(fdA, IbvXrcd.O_CREAT);
        KernelException excl = assertThrows(KernelException.class, () -> b.openXrcd(fdB, IbvXrcd.O_CREAT | IbvXrcd.O_EXCL));
        assertEquals(KernelException.Errno.EINVAL, excl.errno(), "O_EXCL with a domain there");
        IbvXrcd xb = b.openXrcd(fdB, 0);
        KernelException badf = assertThrows(KernelException.class, () -> b.openXrcd(99, IbvXrcd.O_CREAT));
        assertEquals(KernelException.Errno.EBADF, badf.errno());
        // the receive QP made through A's opening delivers into an SRQ made through B's: one domain
        IbvQpInitAttr q = new IbvQpInitAttr();
        q.qpType = IbvQpType.XRC_RECV;
        q.xrcd = xa;
        IbvQp tq = t.ctx.createQpEx(q);
        IbvPd bpd = b.allocPd();
        IbvCq bcq = b.createCq(16, null);
        IbvSrq bs = xrcSrq(b, bpd, xb, bcq);
        long bbuf = other.mmap(4096);
        other.populate(bbuf, 4096, true);
        IbvMr bmr = bpd.regMr(bbuf, 4096, RW);
        IbvRecvWr br = new IbvRecvWr().sge(bbuf, 4096, bmr.lkey());
        br.wrId = 9;
        bs.postRecv(br);
        Initiator i = new Initiator(0, RW);
        new RcConnect().access(RW).minRnrTimer(1).connect(i.qp, t.ctx.queryPort(1).lid(), tq.qpNum());
        new RcConnect().access(RW).minRnrTimer(1).connect(tq, i.ctx.queryPort(1).lid(), i.qp.qpNum());
        byte[] data = fill(i.buf, 300, 5);
        i.qp.postSend(wr(IbvWrOpcode.SEND, i.buf, 300, i.mr.lkey(), 1, bs.srqNum()));
        assertEquals(IbvWcStatus.SUCCESS, one(i.cq).status);
        IbvWc got = one(bcq);
        assertEquals(9, got.wrId);
        assertEquals(tq.qpNum(), got.qpNum);
        byte[] back = new byte[300];
        other.read(bbuf, back, 0, 300);
        assertArrayEquals(data, back, "process B's SRQ received what reached process A's receive QP");
        // A's last opening goes while B still has the domain: it stays; B's close ends it
        xa.close();
        tq.destroy();
        i.ctx.close();
        t.ctx.close();
        b.close();
        other.exit();
    }

    /**
     * {@code ibv_open_qp}: process B opens the XRC receive QP that process A created in their
     * shared domain; B's handle moves it to RTR (one QP: A's handle sees the state), the first
     * message's {@code COMM_EST} reaches both contexts, each naming its own handle; A's handle
     * and A's whole context go and B's SRQ still receives through the QP; B's destroy ends it (the
     * sender retries out). The refusals: another type, a number the domain does not have, a
     * domain opened by another context, a context closed.
     */
    @Test
    void anOpenedXrcReceiveQpOutlivesItsCreatorAndHearsItsEvents() throws Exception {
        AddressSpace other = mm.createProcess("xrc-opener");
        AutoCloseable file = () -> { };
        int fdA = proc.installFd(file);
        int fdB = other.installFd(file);
        IbvContext a = devs.get(1).open(proc);
        IbvContext b = devs.get(1).open(other);
        IbvXrcd xa = a.openXrcd(fdA, IbvXrcd.O_CREAT);
        IbvXrcd xb = b.openXrcd(fdB, 0);
        IbvQpInitAttr q = new IbvQpInitAttr();
        q.qpType = IbvQpType.XRC_RECV;
        q.xrcd = xa;
        IbvQp tq = a.createQpEx(q);
        IbvQpOpenAttr open = new IbvQpOpenAttr();
        open.xrcd = xb;
        open.qpNum = tq.qpNum() + 1;
        KernelException none = assertThrows(KernelException.class, () -> b.openQp(open));
        assertEquals(KernelException.Errno.EINVAL, none.errno());
        assertTrue(none.getMessage().contains("no XRC receive QP"), none.getMessage());
        open.qpNum = tq.qpNum();
        open.qpType = IbvQpType.RC;
        assertTrue(assertThrows(KernelException.class, () -> b.openQp(open)).getMessage().contains("only an XRC receive QP"));
        open.qpType = IbvQpType.XRC_RECV;
        open.xrcd = xa;
        assertTrue(assertThrows(KernelException.class, () -> b.openQp(open)).getMessage().contains("another context"));
        open.xrcd = xb;
        IbvQp hb = b.openQp(open);
        assertEquals(tq.qpNum(), hb.qpNum());
        assertEquals(IbvQpType.XRC_RECV, hb.qpType());
        // B's receiving side in the same domain
        IbvPd bpd = b.allocPd();
        IbvCq bcq = b.createCq(16, null);
        IbvSrq bs = xrcSrq(b, bpd, xb, bcq);
        long bbuf = other.mmap(4 * 4096);
        other.populate(bbuf, 4 * 4096, true);
        IbvMr bmr = bpd.regMr(bbuf, 4 * 4096, RW);
        for (int k = 0; k < 3; k++) {
            IbvRecvWr br = new IbvRecvWr().sge(bbuf + 4096L * k, 4096, bmr.lkey());
            br.wrId = 10 + k;
            bs.postRecv(br);
        }
        Initiator i = new Initiator(0, RW);
        new RcConnect().access(RW).minRnrTimer(1).timeout(8, 1).connect(i.qp, a.queryPort(1).lid(), tq.qpNum());
        // the target to RTR through B's handle only: an XRC receive QP needs no RTS to receive
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.INIT;
        x.pkeyIndex = 0;
        x.portNum = 1;
        x.qpAccessFlags = RW;
        int m = IbvQpAttr.STATE;
        hb.modify(x, m | IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT
                | IbvQpAttr.ACCESS_FLAGS);
        x.qpState = IbvQpState.RTR;
        x.pathMtu = 5;
        x.destQpNum = i.qp.qpNum();
        x.rqPsn = 0;
        x.minRnrTimer = 1;
        x.dlid = i.ctx.queryPort(1).lid();
        hb.modify(x, m | IbvQpAttr.AV | IbvQpAttr.PATH_MTU
                | IbvQpAttr.DEST_QPN | IbvQpAttr.RQ_PSN
                | IbvQpAttr.MAX_DEST_RD_ATOMIC | IbvQpAttr.MIN_RNR_TIMER);
        assertEquals(IbvQpState.RTR, tq.query().qpState, "one QP: the creator's handle sees what the opener's did");
        byte[] first = fill(i.buf, 200, 1);
        i.qp.postSend(wr(IbvWrOpcode.SEND, i.buf, 200, i.mr.lkey(), 1, bs.srqNum()));
        assertEquals(IbvWcStatus.SUCCESS, one(i.cq).status);
        IbvWc got = one(bcq);
        assertEquals(10, got.wrId);
        assertEquals(tq.qpNum(), got.qpNum);
        assertArrayEquals(first, readOf(other, bbuf, 200));
        for (IbvContext c : List.of(a, b)) {
            IbvAsyncEvent e = c.getAsyncEvent(5, TimeUnit.SECONDS);
            assertTrue(e != null && e.type() == IbvEventType.COMM_EST, "COMM_EST to every handle's context: " + e);
            assertTrue(e.qp() == (c == a ? tq : hb), "each context's event names its own handle");
        }
        // the creator's handle, then its whole context, go: the QP stays, B still receives through it
        tq.destroy();
        assertThrows(KernelException.class, () -> tq.modify(x, m), "a destroyed handle modifies nothing");
        xa.close();
        a.close();
        assertEquals(IbvQpState.RTR, hb.query().qpState);
        byte[] second = fill(i.buf + 4096, 300, 2);
        i.qp.postSend(wr(IbvWrOpcode.SEND, i.buf + 4096, 300, i.mr.lkey(), 2, bs.srqNum()));
        assertEquals(IbvWcStatus.SUCCESS, one(i.cq).status, "the opened QP outlived its creator");
        assertEquals(11, one(bcq).wrId);
        assertArrayEquals(second, readOf(other, bbuf + 4096, 300));
        // B's handle was the last: the QP goes, a message to it now goes nowhere
        hb.destroy();
        open.xrcd = xb;
        assertTrue(assertThrows(KernelException.class, () -> b.openQp(open)).getMessage().contains("no XRC receive QP"), "gone from the domain");
        i.qp.postSend(wr(IbvWrOpcode.SEND, i.buf, 100, i.mr.lkey(), 3, bs.srqNum()));
        assertEquals(IbvWcStatus.RETRY_EXC_ERR, one(i.cq).status, "no receive QP of that number any more");
        IbvWc[] left = {new IbvWc()};
        assertEquals(0, bcq.poll(1, left), "nothing more received");
        b.close();
        assertThrows(KernelException.class, () -> b.openQp(open), "a closed context opens nothing");
        i.ctx.close();
        other.exit();
    }

    /** An XRC SRQ of {@code ctx} in domain {@code xrcd}, completing to {@code cq}, of 8 receives. */
    private static IbvSrq xrcSrq(IbvContext ctx, IbvPd pd, IbvXrcd xrcd, IbvCq cq) {
        IbvSrqInitAttrEx s = new IbvSrqInitAttrEx();
        s.srqType = IbvSrqInitAttrEx.SrqType.XRC;
        s.pd = pd;
        s.xrcd = xrcd;
        s.cq = cq;
        s.maxWr = 8;
        return ctx.createSrqEx(s);
    }

    private static byte[] readOf(AddressSpace p, long va, int len) {
        byte[] out = new byte[len];
        p.read(va, out, 0, len);
        return out;
    }
}
