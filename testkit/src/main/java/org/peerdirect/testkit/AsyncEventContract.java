package org.peerdirect.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.ib.core.verbs.IbvSrqAttr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The asynchronous-event contract of a verbs provider ({@code ibv_get_async_event}): extend it
 * with hooks that start two devices of your driver on one fabric, open a context, connect two RC
 * QPs, and remove a device; JUnit 5 runs the contract against the real core, and every test ends
 * with your machine's audit.
 *
 * <p>Checked, as the kernel and the IBA define them: an armed SRQ raises
 * {@code SRQ_LIMIT_REACHED} once, when fewer receive requests than its limit remain, and disarms
 * (query reads 0); the limit's range and the resize refusal; a responder's access violation is
 * the responder QP's {@code QP_ACCESS_ERR} (the requester gets {@code REM_ACCESS_ERR}); an error
 * a receive completion reports raises no event; a responder still in RTR raises {@code COMM_EST}
 * on its first packet, once; a QP on an SRQ moving to ERR raises
 * {@code QP_LAST_WQE_REACHED} once; a CQ overrun raises {@code CQ_ERR}; events go to the owning
 * context only; a link going down is {@code PORT_ERR} to every context of the device (traffic
 * over it ends in {@code RETRY_EXC_ERR}) and coming up {@code PORT_ACTIVE}; the wait is bounded and closing the context wakes a waiter with EINVAL; a
 * removed device queues {@code DEVICE_FATAL}, then reads EIO.
 */
public abstract class AsyncEventContract {

    protected static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC;
    /** Long enough for any event the device raises (they come within milliseconds); bounds every wait. */
    private static final long EVENT_WAIT_MS = 10_000;
    /** How long "no event" is watched for. */
    private static final long QUIET_MS = 50;

    @TempDir
    protected Path tmp;

    /** Two devices of the driver on one fabric (device 0 and 1, port 1 each), one process. */
    protected abstract void start(Path tmp);

    /** {@code ibv_open_device} of device {@code dev} in {@link #process()}. */
    protected abstract IbvContext open(int dev);

    protected abstract AddressSpace process();

    /** Moves both RC QPs from RESET to RTS towards each other with remote rights {@link #RW}. */
    protected abstract void connect(IbvQp a, IbvContext ctxA, IbvQp b, IbvContext ctxB);

    /** Removes device {@code dev} as its driver's unbind does (the core disassociates its users). */
    protected abstract void removeDevice(int dev);

    /** Takes port 1 of device {@code dev} down or up, as a pulled cable or a switch port does. */
    protected abstract void setLink(int dev, boolean up);

    /** Takes the machine down and fails when anything was left behind (the audit). */
    protected abstract void stop();

    /** One device's side: a context, a PD, a CQ and 1 MiB of registered memory. */
    protected final class Side {
        public final IbvContext ctx;
        public final IbvPd pd;
        public final IbvCq cq;
        public final long buf;
        public final IbvMr mr;

        Side(int dev) {
            ctx = open(dev);
            pd = ctx.allocPd();
            cq = ctx.createCq(64, null);
            buf = process().mmap(1 << 20);
            process().populate(buf, 1 << 20, true);
            mr = pd.regMr(buf, 1 << 20, RW);
        }

        public IbvQp qp(IbvCq cq, IbvSrq srq) {
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.qpType = IbvQpType.RC;
            a.sendCq = cq;
            a.recvCq = cq;
            a.srq = srq;
            a.maxSendWr = 32;
            a.maxRecvWr = srq == null ? 32 : 0;
            return pd.createQp(a);
        }
    }

    private final List<IbvContext> opened = new ArrayList<>();
    protected Side a;
    protected Side b;

    @BeforeEach
    void up() {
        start(tmp);
        a = new Side(0);
        b = new Side(1);
        opened.add(a.ctx);
        opened.add(b.ctx);
    }

    @AfterEach
    void down() {
        try {
            for (IbvContext c : opened) {
                c.close(); // destroys what a test left
            }
        } finally {
            stop();
        }
    }

    // ------------------------------------------------------------------ helpers

    private static IbvAsyncEvent event(IbvContext c, String what) throws InterruptedException {
        IbvAsyncEvent e = c.getAsyncEvent(EVENT_WAIT_MS, TimeUnit.MILLISECONDS);
        assertNotNull(e, what + ": no event within " + EVENT_WAIT_MS + " ms");
        return e;
    }

    private static void quiet(IbvContext c, String what) throws InterruptedException {
        IbvAsyncEvent e = c.getAsyncEvent(QUIET_MS, TimeUnit.MILLISECONDS);
        assertNull(e, what + ": no event, got " + e);
    }

    /** The next {@code n} completions of {@code cq}, bounded ({@link VerbsContractSupport#await}). */
    private static List<IbvWc> await(IbvCq cq, int n) {
        return VerbsContractSupport.await(cq, n);
    }

    private static IbvSendWr wr(IbvWrOpcode op, Side s, int len) {
        IbvSendWr w = new IbvSendWr().sge(s.buf, len, s.mr.lkey());
        w.opcode = op;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.wrId = 0xe0;
        return w;
    }

    private static void toError(IbvQp qp) {
        IbvQpAttr at = new IbvQpAttr();
        at.qpState = IbvQpState.ERR;
        qp.modify(at, IbvQpAttr.STATE);
    }

    // ------------------------------------------------------------------ SRQ limit

    @Test
    void anArmedSrqRaisesItsLimitEventOnceWhenFewerRequestsThanTheLimitRemainAndDisarms() throws Exception {
        IbvSrq srq = b.pd.createSrq(15, 1);
        IbvSrqAttr q = srq.query();
        assertEquals(0, q.srqLimit, "a new SRQ is not armed");
        assertTrue(q.maxWr >= 15, "max_wr covers what was asked: " + q);
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> srq.modify(new IbvSrqAttr(0, 0, 1 << 20), IbvSrqAttr.LIMIT))
                .errno(), "a limit beyond the SRQ's size");
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> srq.modify(new IbvSrqAttr(64, 1, 0), IbvSrqAttr.MAX_WR))
                .errno(), "resizing an SRQ");
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> srq.modify(new IbvSrqAttr(0, 0, 1), 1 << 5)).errno(),
                "an unknown mask bit");
        IbvQp qa = a.qp(a.cq, null);
        IbvQp qb = b.qp(b.cq, srq);
        connect(qa, a.ctx, qb, b.ctx);
        for (int i = 0; i < 8; i++) {
            IbvRecvWr r = new IbvRecvWr().sge(b.buf + 4096L * i, 4096, b.mr.lkey());
            r.wrId = i;
            srq.postRecv(r);
        }
        srq.modify(new IbvSrqAttr(0, 0, 4), IbvSrqAttr.LIMIT);
        assertEquals(4, srq.query().srqLimit, "armed at 4");
        quiet(b.ctx, "arming with more requests than the limit");
        // 8 posted: after 4 sends 4 remain (not fewer than 4); the 5th leaves 3
        for (int i = 0; i < 4; i++) {
            qa.postSend(wr(IbvWrOpcode.SEND, a, 64));
        }
        assertTrue(await(a.cq, 4).stream().allMatch(c -> c.status == IbvWcStatus.SUCCESS));
        assertEquals(4, await(b.cq, 4).size());
        quiet(b.ctx, "4 of 8 requests remain, the limit is 4");
        assertEquals(4, srq.query().srqLimit, "still armed");
        qa.postSend(wr(IbvWrOpcode.SEND, a, 64));
        assertEquals(IbvWcStatus.SUCCESS, await(a.cq, 1).get(0).status);
        await(b.cq, 1);
        IbvAsyncEvent e = event(b.ctx, "3 requests left below a limit of 4");
        assertEquals(IbvEventType.SRQ_LIMIT_REACHED, e.type(), e.toString());
        assertSame(srq, e.srq(), "the event names the SRQ");
        assertEquals(0, srq.query().srqLimit, "the event disarmed the SRQ");
        qa.postSend(wr(IbvWrOpcode.SEND, a, 64));
        await(a.cq, 1);
        await(b.cq, 1);
        quiet(b.ctx, "a disarmed SRQ raises no second event");
        quiet(a.ctx, "the requester's context sees none of the responder's events");
        // armed again with the queue already below: the next consumption fires
        srq.modify(new IbvSrqAttr(0, 0, 5), IbvSrqAttr.LIMIT);
        qa.postSend(wr(IbvWrOpcode.SEND, a, 64));
        await(a.cq, 1);
        await(b.cq, 1);
        assertEquals(IbvEventType.SRQ_LIMIT_REACHED, event(b.ctx, "re-armed at 5 with 1 left").type());
        qa.destroy();
        qb.destroy();
        srq.destroy();
    }

    // ------------------------------------------------------------------ QP events

    @Test
    void aResponderAccessViolationIsTheResponderQpsAccessErrorEvent() throws Exception {
        IbvQp qa = a.qp(a.cq, null);
        IbvQp qb = b.qp(b.cq, null);
        connect(qa, a.ctx, qb, b.ctx);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a, 256);
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey() ^ 0x5a; // another key byte: no such key
        qa.postSend(w);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, await(a.cq, 1).get(0).status, "the requester's completion");
        IbvAsyncEvent e = event(b.ctx, "the responder's access violation");
        assertEquals(IbvEventType.QP_ACCESS_ERR, e.type(), e.toString());
        assertSame(qb, e.qp(), "the event names the responder's QP");
        assertEquals(IbvQpState.ERR, qb.query().qpState, "the responder's QP went to ERR (ibv_query_qp asks the device)");
        quiet(b.ctx, "one event");
        quiet(a.ctx, "the requester's context gets no event: its error is in the CQE");
        qa.destroy();
        qb.destroy();
    }

    @Test
    void anErrorAReceiveCompletionReportsRaisesNoEvent() throws Exception {
        IbvQp qa = a.qp(a.cq, null);
        IbvQp qb = b.qp(b.cq, null);
        connect(qa, a.ctx, qb, b.ctx);
        IbvRecvWr r = new IbvRecvWr().sge(b.buf, 16, b.mr.lkey());
        qb.postRecv(r);
        qa.postSend(wr(IbvWrOpcode.SEND, a, 64)); // 64 bytes into a 16-byte receive
        assertEquals(IbvWcStatus.REM_INV_REQ_ERR, await(a.cq, 1).get(0).status, "the requester's completion");
        assertEquals(IbvWcStatus.LOC_LEN_ERR, await(b.cq, 1).get(0).status, "the responder's receive completion");
        quiet(b.ctx, "the receive completion reported the error");
        qa.destroy();
        qb.destroy();
    }

    /** RESET → INIT → RTR towards {@code dlid}/{@code destQpn} (InfiniBand addressing), as RcConnect's first two steps. */
    private static void toRtr(IbvQp qp, int dlid, int destQpn) {
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.INIT;
        x.portNum = 1;
        x.qpAccessFlags = RW;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT | IbvQpAttr.ACCESS_FLAGS);
        x.qpState = IbvQpState.RTR;
        x.pathMtu = 5;
        x.destQpNum = destQpn;
        x.dlid = dlid;
        x.maxDestRdAtomic = 1;
        x.minRnrTimer = 1;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.AV | IbvQpAttr.PATH_MTU | IbvQpAttr.DEST_QPN | IbvQpAttr.RQ_PSN
                | IbvQpAttr.MAX_DEST_RD_ATOMIC | IbvQpAttr.MIN_RNR_TIMER);
    }

    @Test
    void aResponderStillInRtrReportsCommunicationEstablishedOnItsFirstPacket() throws Exception {
        Assumptions.assumeTrue(b.ctx.queryPort(1).linkLayer() == IbvPortAttr.LINK_LAYER_INFINIBAND, "addressed by LID here");
        IbvQp qa = a.qp(a.cq, null);
        IbvQp qb = b.qp(b.cq, null);
        int lidA = a.ctx.queryPort(1).lid();
        int lidB = b.ctx.queryPort(1).lid();
        toRtr(qb, lidA, qa.qpNum()); // the responder stays in RTR (its RTU never came, in CM terms)
        toRtr(qa, lidB, qb.qpNum());
        IbvQpAttr rts = new IbvQpAttr();
        rts.qpState = IbvQpState.RTS;
        rts.timeout = 14;
        rts.retryCnt = 7;
        rts.rnrRetry = 7;
        rts.maxRdAtomic = 1;
        qa.modify(rts, IbvQpAttr.STATE | IbvQpAttr.TIMEOUT | IbvQpAttr.RETRY_CNT | IbvQpAttr.RNR_RETRY | IbvQpAttr.SQ_PSN
                | IbvQpAttr.MAX_QP_RD_ATOMIC);
        for (int i = 0; i < 2; i++) {
            qb.postRecv(new IbvRecvWr().sge(b.buf + 4096L * i, 4096, b.mr.lkey()));
        }
        qa.postSend(wr(IbvWrOpcode.SEND, a, 64));
        assertEquals(IbvWcStatus.SUCCESS, await(a.cq, 1).get(0).status);
        assertEquals(IbvWcStatus.SUCCESS, await(b.cq, 1).get(0).status, "a QP in RTR receives");
        IbvAsyncEvent e = event(b.ctx, "the first packet in RTR");
        assertEquals(IbvEventType.COMM_EST, e.type(), e.toString());
        assertSame(qb, e.qp());
        qa.postSend(wr(IbvWrOpcode.SEND, a, 64));
        await(a.cq, 1);
        await(b.cq, 1);
        quiet(b.ctx, "COMM_EST once per trip through RTR");
        qa.destroy();
        qb.destroy();
    }

    @Test
    void aQpOnAnSrqMovingToErrorRaisesLastWqeReachedOnce() throws Exception {
        IbvSrq srq = b.pd.createSrq(8, 1);
        IbvQp onSrq = b.qp(b.cq, srq);
        IbvQp own = b.qp(b.cq, null);
        toError(own);
        quiet(b.ctx, "a QP with its own receive queue");
        toError(onSrq);
        IbvAsyncEvent e = event(b.ctx, "a QP on an SRQ in ERR");
        assertEquals(IbvEventType.QP_LAST_WQE_REACHED, e.type(), e.toString());
        assertSame(onSrq, e.qp());
        toError(onSrq);
        quiet(b.ctx, "ERR to ERR is no new event");
        onSrq.destroy();
        own.destroy();
        srq.destroy();
    }

    @Test
    void aCqOverrunIsACqErrorEvent() throws Exception {
        IbvCq small = a.ctx.createCq(1, null);
        IbvQp qa = a.qp(small, null);
        IbvQp qb = b.qp(b.cq, null);
        connect(qa, a.ctx, qb, b.ctx);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a, 64);
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        int cqe = small.cqe();
        for (int i = 0; i < cqe + 4; i++) {
            qa.postSend(w); // nobody polls
        }
        IbvAsyncEvent e = event(a.ctx, (cqe + 4) + " completions into a CQ of " + cqe);
        assertEquals(IbvEventType.CQ_ERR, e.type(), e.toString());
        assertSame(small, e.cq());
        qa.destroy();
        qb.destroy();
        small.destroy();
    }

    // ------------------------------------------------------------------ port events

    @Test
    void aLinkGoingDownIsPortErrToEveryContextOfTheDeviceAndUpIsPortActive() throws Exception {
        IbvContext b2 = open(1);
        opened.add(b2);
        IbvQp qa = a.qp(a.cq, null);
        IbvQp qb = b.qp(b.cq, null);
        connect(qa, a.ctx, qb, b.ctx);
        setLink(1, false);
        for (IbvContext c : List.of(b.ctx, b2)) {
            IbvAsyncEvent e = event(c, "link down");
            assertEquals(IbvEventType.PORT_ERR, e.type(), e.toString());
            assertEquals(1, e.portNum());
        }
        quiet(a.ctx, "the other device's context");
        assertEquals(IbvPortAttr.PORT_DOWN, b.ctx.queryPort(1).state(), "ibv_query_port shows the port down");
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a, 64);
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        qa.postSend(w);
        assertEquals(IbvWcStatus.RETRY_EXC_ERR, await(a.cq, 1).get(0).status, "nothing answers behind a down link");
        setLink(1, true);
        for (IbvContext c : List.of(b.ctx, b2)) {
            IbvAsyncEvent e = event(c, "link up");
            assertEquals(IbvEventType.PORT_ACTIVE, e.type(), e.toString());
            assertEquals(1, e.portNum());
        }
        assertEquals(IbvPortAttr.PORT_ACTIVE, b.ctx.queryPort(1).state());
        // the requester went to ERR with its error; a fresh pair goes through the link again
        IbvQp qa2 = a.qp(a.cq, null);
        IbvQp qb2 = b.qp(b.cq, null);
        connect(qa2, a.ctx, qb2, b.ctx);
        qa2.postSend(w);
        assertEquals(IbvWcStatus.SUCCESS, await(a.cq, 1).get(0).status, "traffic after the link came back");
        setLink(1, true);
        quiet(b.ctx, "up while up is no event");
        for (IbvQp q : List.of(qa, qb, qa2, qb2)) {
            q.destroy();
        }
    }

    // ------------------------------------------------------------------ the queue itself

    @Test
    void theWaitIsBoundedAndClosingTheContextWakesAWaiterWithEinval() throws Exception {
        assertNull(a.ctx.getAsyncEvent(0, TimeUnit.MILLISECONDS), "nothing queued: null at once");
        IbvContext c = open(0);
        AtomicReference<Object> got = new AtomicReference<>();
        Thread waiter = Thread.ofPlatform().name("async-waiter").start(() -> {
            try {
                got.set(c.getAsyncEvent(60, TimeUnit.SECONDS));
            } catch (KernelException e) {
                got.set(e.errno());
            } catch (InterruptedException e) {
                got.set(e);
            }
        });
        c.close();
        waiter.join(EVENT_WAIT_MS);
        assertFalse(waiter.isAlive(), "the waiter woke when its context closed");
        assertEquals(Errno.EINVAL, got.get(), "a closed context reads EINVAL");
        assertEquals(Errno.EINVAL, assertThrows(KernelException.class, () -> c.getAsyncEvent(0, TimeUnit.MILLISECONDS)).errno());
    }

    @Test
    void aRemovedDeviceQueuesDeviceFatalThenReadsEio() throws Exception {
        IbvQp qa = a.qp(a.cq, null);
        IbvQp qb = b.qp(b.cq, null);
        connect(qa, a.ctx, qb, b.ctx);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, a, 64);
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey() ^ 0x5a;
        qa.postSend(w);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, await(a.cq, 1).get(0).status);
        removeDevice(1);
        // the access error's event may or may not have reached the queue before the removal; DEVICE_FATAL comes after it
        IbvAsyncEvent f = event(b.ctx, "DEVICE_FATAL");
        if (f.type() == IbvEventType.QP_ACCESS_ERR) {
            f = event(b.ctx, "DEVICE_FATAL after the pending event");
        }
        assertEquals(IbvEventType.DEVICE_FATAL, f.type(), f.toString());
        assertEquals(0, f.portNum());
        assertEquals(Errno.EIO, assertThrows(KernelException.class, () -> b.ctx.getAsyncEvent(0, TimeUnit.MILLISECONDS)).errno(),
                "a disassociated context's queue reads EIO once empty");
        quiet(a.ctx, "the other device's context");
        qa.destroy();
        qb.destroy(); // quietly on a removed device
    }
}
