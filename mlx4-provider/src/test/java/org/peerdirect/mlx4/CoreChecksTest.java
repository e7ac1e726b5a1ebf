package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.rdma.RcConnect;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * What the IB core does once for every driver, seen through the mlx4 driver: process exit as the
 * uverbs file's release, use counts, objects of the right context, attribute ranges.
 */
class CoreChecksTest {

    @TempDir
    Path tmp;
    Lab lab;
    Lab.End a;

    @BeforeEach
    void up() {
        lab = new Lab(tmp, 2);
        a = lab.new End(0, 1 << 16, IbvQpType.RC, Lab.RW);
    }

    @AfterEach
    void down() {
        lab.close();
    }

    private static IbvQpInitAttr qpAttr(IbvCq cq, IbvSrq srq) {
        IbvQpInitAttr x = new IbvQpInitAttr();
        x.sendCq = cq;
        x.recvCq = cq;
        x.srq = srq;
        return x;
    }

    @Test
    void aKilledProcessLeavesNothingReachable() {
        AddressSpace victim = lab.mm.createProcess("victim");
        victim.setMemlockLimit(1L << 30);
        IbvContext ctx = lab.ib.get(1).open(victim);
        IbvPd pd = ctx.allocPd();
        IbvCq cq = ctx.createCq(16, null);
        IbvQp qp = pd.createQp(qpAttr(cq, null));
        long buf = victim.mmap(1 << 16);
        victim.populate(buf, 1 << 16, true);
        IbvMr mr = pd.regMr(buf, 1 << 16, Lab.RW);
        int victimLid = ctx.queryPort(1).lid();
        new RcConnect().access(Lab.RW).minRnrTimer(1).timeout(1, 1).connect(a.qp, victimLid, qp.qpNum());
        new RcConnect().access(Lab.RW).minRnrTimer(1).timeout(1, 1).connect(qp, a.lid, a.qp.qpNum());
        assertTrue(victim.pinnedPages() > 0, "the MR pins the victim's memory");
        assertEquals(1, lab.core.openContexts(lab.ib.get(1)));

        victim.exit(); // kill -9: the process's uverbs file is released before exit returns

        assertEquals(0, lab.core.openContexts(lab.ib.get(1)), "its context is closed");
        assertEquals(0, victim.pinnedPages(), "its pins are released");
        assertEquals(0, victim.openFiles());
        // another process can no longer write into the dead process's memory through its rkey
        IbvSendWr w = new IbvSendWr().sge(a.buf, 64, a.mr.lkey());
        w.opcode = IbvWrOpcode.RDMA_WRITE;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.remoteAddr = buf;
        w.rkey = mr.rkey();
        a.qp.postSend(w);
        IbvWc c = Lab.await(a.cq, 1).get(0);
        assertTrue(c.status == IbvWcStatus.RETRY_EXC_ERR || c.status == IbvWcStatus.REM_ACCESS_ERR,
                "the peer sees an error, not a write: " + c);
        KernelException e = assertThrows(KernelException.class, () -> ctx.allocPd());
        assertEquals(Errno.EINVAL, e.errno(), "the context is closed");
    }

    /**
     * mlx4 has no {@code reg_user_mr_dmabuf}: {@code ibv_reg_dmabuf_mr} is EOPNOTSUPP whatever the
     * arguments (the kernel tests the op before them), as NVIDIA/nccl#778 reports for stacks without it.
     */
    @Test
    void aDmabufRegistrationIsNotSupportedOnMlx4() throws Exception {
        long[] frame = {lab.mm.allocPages(0)};
        org.peerdirect.kernel.dmabuf.DmaBuf buf = org.peerdirect.kernel.dmabuf.DmaBuf.export("test", 4096, new org.peerdirect.kernel.dmabuf.DmaBufOps() {
            @Override
            public org.peerdirect.kernel.dma.SgTable map(org.peerdirect.kernel.dmabuf.DmaBufAttachment at, org.peerdirect.kernel.dma.DmaDirection dir) {
                throw new AssertionError("mlx4 never maps a dma-buf");
            }

            @Override
            public void unmap(org.peerdirect.kernel.dmabuf.DmaBufAttachment at, org.peerdirect.kernel.dma.SgTable sg,
                    org.peerdirect.kernel.dma.DmaDirection dir) {
            }

            @Override
            public void release(org.peerdirect.kernel.dmabuf.DmaBuf b) {
                lab.mm.freePages(frame[0], 0);
            }
        });
        int fd = buf.fd(lab.proc);
        KernelException e = assertThrows(KernelException.class, () -> a.pd.regDmabufMr(0, 4096, 0, fd, Lab.RW));
        assertEquals(Errno.EOPNOTSUPP, e.errno());
        assertTrue(e.getMessage().contains("reg_user_mr_dmabuf"), e.getMessage());
        e = assertThrows(KernelException.class, () -> a.pd.regDmabufMr(0, 4096, 0x800, fd, Lab.RW));
        assertEquals(Errno.EOPNOTSUPP, e.errno(), "the op is tested before the page offsets");
        lab.proc.close(fd);
    }

    @Test
    void useCountsRefuseDestroyingWhatIsInUse() {
        IbvSrq srq = a.pd.createSrq(4, 1);
        IbvQp q = a.pd.createQp(qpAttr(a.cq, srq));
        KernelException e = assertThrows(KernelException.class, () -> a.pd.dealloc());
        assertEquals(Errno.EBUSY, e.errno());
        e = assertThrows(KernelException.class, () -> a.cq.destroy());
        assertEquals(Errno.EBUSY, e.errno());
        assertTrue(e.getMessage().contains("QP"), e.getMessage());
        e = assertThrows(KernelException.class, () -> srq.destroy());
        assertEquals(Errno.EBUSY, e.errno());
        q.destroy();
        srq.destroy(); // free now
    }

    @Test
    void objectsOfAnotherContextAreRefused() {
        IbvContext other = lab.open(0);
        IbvCq foreign = other.createCq(4, null);
        KernelException e = assertThrows(KernelException.class, () -> a.pd.createQp(qpAttr(foreign, null)));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("another context"), e.getMessage());
        IbvQpInitAttr big = qpAttr(a.cq, null);
        big.maxSendWr = 1 << 20;
        e = assertThrows(KernelException.class, () -> a.pd.createQp(big));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("max_qp_wr"), e.getMessage());
    }

    @Test
    void attributeRangesAreCheckedByTheCore() {
        IbvQp q = a.pd.createQp(qpAttr(a.cq, null));
        IbvQpAttr x = new IbvQpAttr();
        x.retryCnt = 8;
        KernelException e = assertThrows(KernelException.class, () -> q.modify(x, IbvQpAttr.RETRY_CNT));
        assertEquals(Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("retry_cnt 8"), e.getMessage());
        x.retryCnt = 7;
        x.portNum = 2;
        x.qpState = org.peerdirect.ib.core.verbs.IbvQpState.INIT;
        e = assertThrows(KernelException.class, () -> q.modify(x, IbvQpAttr.STATE | IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT
                | IbvQpAttr.ACCESS_FLAGS));
        assertTrue(e.getMessage().contains("no port 2"), e.getMessage());
        q.destroy();
    }

    @Test
    void numbersAreReusedSoCyclesExhaustNothing() {
        for (int i = 0; i < 70_000; i++) {
            a.pd.createQp(qpAttr(a.cq, null)).destroy(); // more than the 65 536-entry QP table
        }
        // a QP the driver created and destroyed in RESET never reached the device (mlx4_qp_alloc issues no
        // command): the driver's QPN bitmap counts them, QUERY_QP reads what the device holds
        assertEquals(1, lab.devs.get(0).qpnsInUse(), "only a's QP is alive");
        assertEquals(0, lab.machine.engine(0).qps().size(), "and the device holds no QP: a's is in RESET");
        assertEquals(IbvQpState.RESET, a.qp.query().qpState, "QUERY_QP of a's QP");
        for (int i = 0; i < 2_000; i++) {
            a.pd.regMr(a.buf, 4096, Lab.RW).dereg();
        }
        assertEquals(1, lab.machine.engine(0).mptCount(), "only a's MR is alive");
        assertEquals(IbvQpType.RC, a.pd.createQp(qpAttr(a.cq, null)).qpType(), "a QP can still be created");
    }
}
