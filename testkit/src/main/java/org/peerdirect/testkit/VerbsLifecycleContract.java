package org.peerdirect.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvAh;
import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.ib.core.verbs.IbvSrqInitAttrEx;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.IbvXrcd;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The destroy half of the verbs contract: every verbs object's destroy or close is idempotent
 * (pyverbs' {@code close()} may run several times, rdma-core's {@code test_mr.py} deregisters an
 * MR twice, and Java's {@code close} convention says the same): the second call does nothing and
 * returns, also after the context's close destroyed the object; every other use of a destroyed
 * object fails as it did (EINVAL naming it).
 *
 * @since 0.6
 */
public abstract class VerbsLifecycleContract extends VerbsContractSupport {

    /** The errno of {@code use} on a destroyed object: it still fails, and names what is gone. */
    private static void stillFails(Errno errno, Runnable use, String what) {
        KernelException e = assertThrows(KernelException.class, use::run, what + " after destroy");
        assertEquals(errno, e.errno(), what + ": " + e.getMessage());
    }

    private long freshBuffer(int len) {
        long va = process().mmap(len);
        process().populate(va, len, true);
        return va;
    }

    @Test
    void anMrIsDeregisteredTwiceAndItsPdThenGoes() {
        IbvPd pd = a.ctx.allocPd();
        long va = freshBuffer(1 << 16);
        long pinned = process().pinnedPages();
        IbvMr mr = pd.regMr(va, 1 << 16, RW);
        assertEquals(pinned + 16, process().pinnedPages(), "a pinned MR of 16 pages");
        mr.dereg();
        mr.dereg(); // test_mr.py's test_dereg_mr_twice
        pd.dealloc(); // the MR is gone from its PD
        assertEquals(pinned, process().pinnedPages(), "the MR's pages are unpinned, once");
    }

    @Test
    void anOdpMrExplicitAndImplicitIsDeregisteredTwice() {
        IbvDeviceAttr d = a.attr();
        Assumptions.assumeTrue((d.odpCaps().generalCaps() & IbvDeviceAttr.ODP_SUPPORT) != 0, "the device has no ODP");
        long va = process().mmap(1 << 16);
        IbvMr odp = a.pd.regMr(va, 1 << 16, RW | IbAccess.ON_DEMAND);
        odp.dereg();
        odp.dereg();
        if ((d.odpCaps().generalCaps() & IbvDeviceAttr.ODP_SUPPORT_IMPLICIT) != 0) {
            IbvMr implicit = a.pd.regMr(0, -1L, RW | IbAccess.ON_DEMAND);
            implicit.dereg();
            implicit.dereg();
        }
    }

    @Test
    void aDmabufMrIsDeregisteredTwiceAndItsAttachmentGoesOnce() {
        HostDmaBuf buf = HostDmaBuf.export(mm(), 1 << 16);
        int fd = buf.fd(process());
        IbvMr mr;
        try {
            mr = a.pd.regDmabufMr(0, 1 << 16, 0x10000, fd, RW);
        } catch (KernelException e) {
            closeFd(fd);
            Assumptions.assumeTrue(e.errno() != Errno.EOPNOTSUPP, "the driver has no reg_user_mr_dmabuf");
            throw e;
        }
        closeFd(fd); // the MR's attachment holds its own reference
        mr.dereg(); // test_mr.py's test_dmabuf_dereg_mr_twice
        mr.dereg();
        assertTrue(buf.dmabuf().released(), "the attachment's reference went with the first dereg, the buffer with it");
    }

    private void closeFd(int fd) {
        try {
            process().close(fd);
        } catch (Exception e) {
            throw new AssertionError("close(" + fd + ")", e);
        }
    }

    @Test
    void aPdIsDeallocatedTwiceAndThenRefusesNewMrs() {
        IbvPd pd = a.ctx.allocPd();
        pd.dealloc();
        pd.dealloc();
        stillFails(Errno.EINVAL, () -> pd.regMr(a.buf, 4096, RW), "ibv_reg_mr in a deallocated PD");
    }

    @Test
    void aCqIsDestroyedTwiceAndThenServesNoQp() {
        IbvCq cq = a.ctx.createCq(16, null);
        cq.destroy();
        cq.destroy();
        stillFails(Errno.EINVAL, () -> a.qp(IbvQpType.RC, x -> x.sendCq = cq), "ibv_create_qp on a destroyed CQ");
    }

    @Test
    void aQpIsDestroyedTwiceAndThenCannotBeModified() {
        IbvQp qp = a.qp(IbvQpType.RC, null);
        qp.destroy();
        qp.destroy();
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.ERR;
        stillFails(Errno.EINVAL, () -> qp.modify(x, IbvQpAttr.STATE), "ibv_modify_qp");
    }

    @Test
    void anSrqIsDestroyedTwiceAndThenCannotBeQueried() {
        IbvSrq srq = a.pd.createSrq(16, 1);
        srq.destroy();
        srq.destroy();
        stillFails(Errno.EINVAL, srq::query, "ibv_query_srq");
    }

    @Test
    void anAhIsDestroyedTwice() {
        IbvPd pd = a.ctx.allocPd();
        IbvAh ah = pd.createAh(b.lid, 1);
        ah.destroy();
        ah.destroy();
        pd.dealloc(); // the AH is gone from its PD
    }

    @Test
    void anXrcDomainIsClosedTwiceAndThenTakesNoSrq() {
        Assumptions.assumeTrue((a.attr().deviceCapFlags() & IbvDeviceAttr.DEVICE_XRC) != 0, "the device has no XRC");
        IbvXrcd x = a.ctx.openXrcd(-1, 0);
        x.close();
        x.close();
        IbvSrqInitAttrEx s = new IbvSrqInitAttrEx();
        s.srqType = IbvSrqInitAttrEx.SrqType.XRC;
        s.pd = a.pd;
        s.xrcd = x;
        s.cq = a.cq;
        s.maxWr = 8;
        stillFails(Errno.EINVAL, () -> a.ctx.createSrqEx(s), "ibv_create_srq_ex in a closed XRC domain");
    }

    @Test
    void aCompletionChannelIsDestroyedTwice() throws InterruptedException {
        IbvCompChannel ch = a.ctx.createCompChannel();
        ch.destroy();
        ch.destroy();
        stillFails(Errno.EIO, () -> {
            try {
                ch.getCqEvent(Duration.ofMillis(1));
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }, "ibv_get_cq_event");
    }

    @Test
    void aContextIsClosedTwiceAndThenAllocatesNothing() {
        IbvContext c = openTracked(0);
        c.close();
        c.close();
        stillFails(Errno.EINVAL, c::allocPd, "ibv_alloc_pd");
    }

    /**
     * The context's close destroys everything left (pyverbs closes a context's children with it);
     * each object's own destroy afterwards does nothing, also for a channel with a CQ event not
     * acknowledged (its destroy alone is EBUSY).
     */
    @Test
    void everyObjectIsDestroyedAgainAfterItsContextClosedIt() throws InterruptedException {
        long pinned = process().pinnedPages();
        IbvContext c = openTracked(0);
        IbvPd pd = c.allocPd();
        IbvCompChannel ch = c.createCompChannel();
        IbvCq cq = c.createCq(16, ch);
        IbvCq cq2 = c.createCq(16, null);
        long va = freshBuffer(1 << 16);
        IbvMr mr = pd.regMr(va, 1 << 16, RW);
        IbvSrq srq = pd.createSrq(8, 1);
        IbvAh ah = pd.createAh(b.lid, 1);
        IbvQpInitAttr qa = new IbvQpInitAttr();
        qa.qpType = IbvQpType.RC;
        qa.sendCq = cq;
        qa.recvCq = cq;
        qa.maxSendWr = 4;
        qa.maxRecvWr = 4;
        IbvQp qp = pd.createQp(qa);
        IbvXrcd xrcd = (c.queryDevice().deviceCapFlags() & IbvDeviceAttr.DEVICE_XRC) != 0 ? c.openXrcd(-1, 0) : null;
        // a CQ event delivered and not acknowledged: a completion of a request on a QP in error
        cq.reqNotify(false);
        IbvQpAttr err = new IbvQpAttr();
        err.qpState = IbvQpState.ERR;
        qp.modify(err, IbvQpAttr.STATE);
        qp.postSend(wr(IbvWrOpcode.SEND, a, 0, 0, 1));
        assertSame(cq, ch.getCqEvent(Duration.ofMillis(WAIT_MS)), "the flush completion raised the CQ event");
        assertEquals(Errno.EBUSY, assertThrows(KernelException.class, ch::destroy).errno(), "unacknowledged: the channel's own destroy is EBUSY");
        c.close();
        mr.dereg();
        qp.destroy();
        srq.destroy();
        ah.destroy();
        cq.destroy();
        cq2.destroy();
        ch.destroy();
        pd.dealloc();
        if (xrcd != null) {
            xrcd.close();
        }
        c.close();
        assertEquals(pinned, process().pinnedPages(), "nothing left to destroy: what the context pinned is unpinned, once");
    }
}
