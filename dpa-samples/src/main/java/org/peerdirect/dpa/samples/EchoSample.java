package org.peerdirect.dpa.samples;

import static org.peerdirect.dpa.samples.dev.EchoDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.locks.LockSupport;

import org.peerdirect.dpa.samples.dev.EchoDevStubs;
import org.peerdirect.flexio.FlexioCq;
import org.peerdirect.flexio.FlexioEventHandler;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.flexio.FlexioMkey;
import org.peerdirect.flexio.FlexioOutbox;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.flexio.FlexioQp;
import org.peerdirect.flexio.FlexioStatus;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.rdma.RcConnect;

/**
 * {@code dpa:sample echo} and {@code dpa:sample fence}: an event handler ({@link org.peerdirect.dpa.samples.dev.EchoDev})
 * echoing messages over an RC QP between a host QP and the DPA, every DPA ring, doorbell record and
 * buffer in the process heap (DPA_MODEL.md §4 scenario 2). The host sends in bursts of
 * {@value #BURST} with its receives posted first, so a burst races the handler's arm. The fence
 * sample runs the handler without the write-back before its doorbell: the memory-model checker
 * (strict, the BlueField-3's default) ends the process, nothing comes back, and the sample prints
 * the finding the bench's {@code dpa:mm} holds for the process, naming the handler's line.
 *
 * <p>Everything made is undone in reverse order in {@code finally}, also when a step fails.
 */
final class EchoSample {

    /** Messages the host sends before it waits for their echoes (≤ the DPA's 16 receives). */
    static final int BURST = 8;
    /** Host buffer: send slots at 0, receive slots at {@value #RECV}, 32 of 64 bytes each. */
    static final int HOST_BUF = 1 << 16, RECV = 4096, SLOTS = 32;
    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;
    static final long ECHO_TIMEOUT_NANOS = 30_000_000_000L;

    /** The bench's memory-model findings of one DPA process ({@code dpa:mm}'s lines for it). */
    @FunctionalInterface
    interface Findings {
        String of(int processId);
    }

    private EchoSample() {
    }

    static void echo(IbvContext ctx, int n, Out out) {
        run(ctx, EchoDevStubs.ECHO_HANDLER, n, out, null);
    }

    static void fence(IbvContext ctx, Findings findings, Out out) {
        run(ctx, EchoDevStubs.ECHO_NO_WRITEBACK, 1, out, findings);
    }

    /** Undo actions, newest first. */
    static final class Undo implements AutoCloseable {
        private final Deque<Runnable> steps = new ArrayDeque<>();

        void push(Runnable r) {
            steps.push(r);
        }

        @Override
        public void close() {
            RuntimeException first = null;
            while (!steps.isEmpty()) {
                try {
                    steps.pop().run();
                } catch (RuntimeException e) {
                    if (first == null) {
                        first = e;
                    } else {
                        first.addSuppressed(e);
                    }
                }
            }
            if (first != null) {
                throw first;
            }
        }
    }

    /** The host's end: PD, CQ, RC QP and a registered buffer. */
    record Host(IbvPd pd, IbvCq cq, IbvQp qp, long buf, IbvMr mr) {
    }

    /** The host's end, each piece's undo pushed as it is made. */
    static Host host(IbvContext ctx, Undo undo) {
        AddressSpace as = ctx.process();
        IbvPd pd = ctx.allocPd();
        undo.push(pd::dealloc);
        IbvCq cq = ctx.createCq(256, null);
        undo.push(cq::destroy);
        IbvQpInitAttr a = new IbvQpInitAttr();
        a.sendCq = cq;
        a.recvCq = cq;
        a.qpType = IbvQpType.RC;
        a.maxSendWr = 64;
        a.maxRecvWr = 64;
        long buf = as.mmap(HOST_BUF);
        undo.push(() -> as.munmap(buf, HOST_BUF));
        as.populate(buf, HOST_BUF, true);
        IbvMr mr = pd.regMr(buf, HOST_BUF, RW);
        undo.push(mr::dereg);
        IbvQp qp = pd.createQp(a);
        undo.push(qp::destroy);
        return new Host(pd, cq, qp, buf, mr);
    }

    private static void run(IbvContext ctx, FlexioFunc handlerFunc, int n, Out out, Findings findings) {
        try (Undo undo = new Undo()) {
            Host h = host(ctx, undo);
            FlexioProcess p = FlexioProcess.create(ctx, EchoDevStubs.APP, RpcSample.ATTR);
            undo.push(p::destroy); // destroys the handler, queues, mkey and outbox too, newest first
            FlexioEventHandler[] eh = new FlexioEventHandler[1];
            FlexioQp[] qp = new FlexioQp[1];
            long c = DpaSide.build(p, handlerFunc, eh, qp);
            connect(ctx, qp[0], h);
            eh[0].run();
            out.line("process %d (app %s): %s on DPA thread %d, its RC QP 0x%x (rings in the heap) connected to host QP 0x%x",
                    p.id(), p.app().name(), handlerFunc.name(), eh[0].id(), qp[0].qpNum(), h.qp().qpNum());
            if (findings == null) {
                echoAll(p, h, c, eh[0], n, out);
            } else {
                caught(p, h, findings, out);
            }
        }
        out.line("flexio_process_destroy, host QP, MR, CQ and PD destroyed");
    }

    /** The DPA's QP to RTS facing the host's, the host's through INIT, RTR and RTS facing the DPA's (RoCE GID 0). */
    static void connect(IbvContext ctx, FlexioQp dpaQp, Host h) {
        byte[] gid = FlexioQp.gid(ctx.queryGid(1, 0));
        dpaQp.modifyToRts(h.qp().qpNum(), gid);
        new RcConnect().access(RW).minRnrTimer(1).timeout(14, 7).gid(gid).connect(h.qp(), ctx.queryPort(1).lid(), dpaQp.qpNum());
    }

    private static void echoAll(FlexioProcess p, Host h, long c, FlexioEventHandler eh, int n, Out out) {
        for (int first = 0; first < n; first += BURST) {
            int k = Math.min(BURST, n - first);
            String[] back = burst(h, first, k, ECHO_TIMEOUT_NANOS);
            for (int i = 0; i < k; i++) {
                out.line("sent \"%s\"  came back \"%s\"", message(first + i), i < back.length ? back[i] : "(nothing)");
            }
            if (back.length < k) {
                throw new IllegalStateException(String.format("echo: %d of the burst from message %d did not come back: %s", k - back.length,
                        first, p.crashData().strip()));
            }
        }
        long deadline = System.nanoTime() + ECHO_TIMEOUT_NANOS;
        long count;
        // the last echo can reach the host before its activation stored the count and rescheduled
        while ((count = p.call(EchoDevStubs.ECHO_COUNT, c)) < n && System.nanoTime() < deadline) {
            LockSupport.parkNanos(1_000_000); // a poll's back-off, not a synchronisation
        }
        out.line("%d of %d messages echoed in order; echo_count %d, handler activations %d; %s", n, n, count, eh.activations(),
                Out.errStatus(p.errStatusGet()));
    }

    private static void caught(FlexioProcess p, Host h, Findings findings, Out out) {
        post(h, 0, 1);
        long deadline = System.nanoTime() + ECHO_TIMEOUT_NANOS;
        while (p.errStatusGet() == FlexioStatus.ERR_NO_ERROR && System.nanoTime() < deadline) {
            LockSupport.parkNanos(1_000_000); // a poll's back-off, not a synchronisation
        }
        String[] back = collect(h, 0, 1, 500_000_000L); // the process ended: an echo would be there by now
        out.line("sent \"%s\"  %s", message(0), back.length == 0 ? "no echo came back" : "came back \"" + back[0] + "\"");
        out.line("process %d: dpa_process_status 0x%02x, %s", p.id(), p.processStatus(), Out.errStatus(p.errStatusGet()));
        String f = findings.of(p.id());
        out.line("the memory-model checker (dpa:mm):");
        f.lines().forEach(l -> out.line("  %s", l.strip()));
    }

    static String message(int i) {
        return "msg-" + i + "-echo";
    }

    /** Sends {@code n} messages from {@code first}, their receives posted first; returns the echoes that came back in time, in order. */
    static String[] burst(Host h, int first, int n, long timeoutNanos) {
        post(h, first, n);
        return collect(h, first, n, timeoutNanos);
    }

    /** Posts the receives for {@code n} echoes from {@code first}, then sends the {@code n} messages. */
    static void post(Host h, int first, int n) {
        AddressSpace as = h.pd().context().process();
        for (int i = 0; i < n; i++) {
            h.qp().postRecv(new IbvRecvWr().sge(h.buf() + RECV + (long) (first + i) % SLOTS * BUF, BUF, h.mr().lkey()));
        }
        for (int i = 0; i < n; i++) {
            byte[] msg = message(first + i).getBytes(StandardCharsets.US_ASCII);
            long at = h.buf() + (long) (first + i) % SLOTS * BUF;
            as.write(at, msg, 0, msg.length);
            IbvSendWr w = new IbvSendWr().sge(at, msg.length, h.mr().lkey());
            w.opcode = IbvWrOpcode.SEND;
            w.wrId = first + i;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            h.qp().postSend(w);
        }
    }

    /** The echoes of the {@code n} messages from {@code first} that came back (and their sends completed) within {@code timeoutNanos}, in order. */
    static String[] collect(Host h, int first, int n, long timeoutNanos) {
        AddressSpace as = h.pd().context().process();
        String[] echoes = new String[n];
        int got = 0;
        int sent = 0;
        IbvWc[] wc = {new IbvWc()};
        long deadline = System.nanoTime() + timeoutNanos;
        while (got < n || sent < n) {
            if (h.cq().poll(1, wc) == 1) {
                if (wc[0].status != IbvWcStatus.SUCCESS) {
                    throw new IllegalStateException("host completion " + wc[0].opcode + " failed: " + wc[0].status);
                }
                if (wc[0].opcode == IbvWcOpcode.RECV) {
                    byte[] b = new byte[wc[0].byteLen];
                    as.read(h.buf() + RECV + (long) (first + got) % SLOTS * BUF, b, 0, b.length);
                    echoes[got++] = new String(b, StandardCharsets.US_ASCII);
                } else {
                    sent++;
                }
            } else if (System.nanoTime() > deadline) {
                return java.util.Arrays.copyOf(echoes, got);
            }
        }
        return echoes;
    }

    /** The DPA side: queues and buffers in the heap, the handler on the receive CQ. */
    static final class DpaSide {
        private DpaSide() {
        }

        /** Builds it; returns the handler context's DPA address. */
        static long build(FlexioProcess p, FlexioFunc func, FlexioEventHandler[] handler, FlexioQp[] qp) {
            long rqCq = alloc(p, 64 << LOG_CQ);
            long sqCq = alloc(p, 64 << LOG_CQ);
            long dbr = alloc(p, 192);
            long wq = alloc(p, (64 << LOG_RQ) + (64 << LOG_SQ));
            long data = alloc(p, 2 * BUF << LOG_RQ);
            long ctxd = alloc(p, SIZE);
            byte[] cqes = new byte[64 << LOG_CQ];
            for (int i = 63; i < cqes.length; i += 64) {
                cqes[i] = (byte) 0xf1; // CQE_INVALID, owner 1: hardware's
            }
            p.host2devMemcpy(cqes, rqCq);
            p.host2devMemcpy(cqes, sqCq);
            FlexioMkey mkey = FlexioMkey.deviceMkeyCreate(p, data, 2L * BUF << LOG_RQ);
            ByteBuffer rq = ByteBuffer.allocate(64 << LOG_RQ).order(ByteOrder.BIG_ENDIAN);
            for (int i = 0; i < 1 << LOG_RQ; i++) { // one scatter entry per receive WQE, then MLX5_INVALID_LKEY
                rq.putInt(i * 64, BUF).putInt(i * 64 + 4, mkey.id()).putLong(i * 64 + 8, data + (long) i * BUF);
                rq.putInt(i * 64 + 20, 0x100);
            }
            p.host2devMemcpy(rq.array(), wq);
            p.host2devMemcpy(ByteBuffer.allocate(192).putInt(128, 1 << LOG_RQ).array(), dbr); // qp dbr: 16 receives posted
            FlexioOutbox outbox = FlexioOutbox.create(p);
            handler[0] = FlexioEventHandler.create(p, FlexioEventHandler.Attr.of(func, ctxd));
            FlexioCq rcq = FlexioCq.create(p, new FlexioCq.Attr(LOG_CQ, FlexioCq.ElementType.DPA_THREAD, handler[0], rqCq, dbr));
            FlexioCq scq = FlexioCq.create(p, new FlexioCq.Attr(LOG_CQ, FlexioCq.ElementType.NON_DPA_CQ, null, sqCq, dbr + 64));
            qp[0] = FlexioQp.create(p, new FlexioQp.Attr(scq, rcq, LOG_SQ, LOG_RQ, LOG_RQ_STRIDE, wq, dbr + 128));
            ByteBuffer c = ByteBuffer.allocate(SIZE).order(ByteOrder.LITTLE_ENDIAN);
            c.putLong(OUTBOX, outbox.id()).putLong(RQ_CQN, rcq.cqNum()).putLong(RQ_CQ, rqCq).putLong(RQ_CQ_DBR, dbr)
                    .putLong(SQ_CQ, sqCq).putLong(SQ_CQ_DBR, dbr + 64).putLong(QPN, qp[0].qpNum()).putLong(WQ, wq)
                    .putLong(QP_DBR, dbr + 128).putLong(MKEY, mkey.id()).putLong(RX, data).putLong(TX, data + ((long) BUF << LOG_RQ));
            p.host2devMemcpy(c.array(), ctxd);
            return ctxd;
        }

        private static long alloc(FlexioProcess p, long n) {
            long d = p.bufDevAlloc(n);
            if (d == 0) {
                throw new IllegalStateException("flexio_buf_dev_alloc: no " + n + " bytes left in the process heap");
            }
            return d;
        }
    }
}
