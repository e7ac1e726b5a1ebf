package org.peerdirect.flexio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.flexio.progs.EchoProgs.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.flexio.progs.EchoProgs;
import org.peerdirect.flexio.progs.RpcProgs;
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
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.rdma.RcConnect;

/**
 * DPA_MODEL.md §4 scenario 2: an event handler echoing over an RC QP whose rings, doorbell records
 * and buffers live in the DPA heap (FlexIO CQs, QP and device mkey), a host peer sending bursts
 * that race the handler's arm: every message comes back upper-cased, in order, with at most one
 * activation per message. The mutant (no memory write-back before the send doorbell) is caught
 * by the memory model (C1) naming the handler's line, and no echo leaves.
 */
class FlexioEchoTest {

    static final int N = 32;
    static final int BURST = 8;
    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;

    @TempDir
    Path tmp;
    FlexioMachine m;
    IbvContext ctx;

    @BeforeEach
    void up() {
        m = new FlexioMachine(tmp);
        ctx = m.open();
    }

    @AfterEach
    void down() {
        ctx.close();
        m.close();
    }

    static final FlexioFunc ECHO = new FlexioFunc("echo_handler", FlexioFunc.Kind.GLOBAL, 8, TestApps.longs("echo_handler", 1));
    static final FlexioFunc ECHO_MUTANT = new FlexioFunc("echo_no_writeback", FlexioFunc.Kind.GLOBAL, 8,
            TestApps.longs("echo_no_writeback", 1));

    static final FlexioFunc ECHO_NO_ARM = new FlexioFunc("echo_no_arm", FlexioFunc.Kind.GLOBAL, 8, TestApps.longs("echo_no_arm", 1));

    static FlexioApp echoApp() {
        byte[] image = TestApps.linked().add(EchoProgs.class).add(RpcProgs.class)
                .global("echo_handler", EchoProgs.class, "echo").global("echo_no_writeback", EchoProgs.class, "echoNoWriteback")
                .global("echo_no_arm", EchoProgs.class, "echoNoArm")
                .rpc("rpc_read", RpcProgs.class, "rpcRead", 8).pack();
        return FlexioApp.create("flexio_echo", image, List.of(ECHO, ECHO_MUTANT, ECHO_NO_ARM, TestApps.READ));
    }

    /** The host's end: PD, CQ, RC QP and a registered buffer (sends at 0, receives from 4096). */
    record Host(IbvPd pd, IbvCq cq, IbvQp qp, long buf, IbvMr mr) {
        void close(IbvContext ctx) {
            qp.destroy();
            mr.dereg();
            cq.destroy();
            pd.dealloc();
            ctx.process().munmap(buf, 1 << 16);
        }
    }

    Host host() {
        IbvPd pd = ctx.allocPd();
        IbvCq cq = ctx.createCq(256, null);
        IbvQpInitAttr a = new IbvQpInitAttr();
        a.sendCq = cq;
        a.recvCq = cq;
        a.qpType = IbvQpType.RC;
        a.maxSendWr = 64;
        a.maxRecvWr = 64;
        IbvQp qp = pd.createQp(a);
        long buf = ctx.process().mmap(1 << 16);
        ctx.process().populate(buf, 1 << 16, true);
        return new Host(pd, cq, qp, buf, pd.regMr(buf, 1 << 16, RW));
    }

    /** The DPA side: queues and buffers in the heap, the handler {@code func} on the receive CQ; returns its context's address. */
    static long dpaSide(FlexioProcess p, FlexioFunc func, FlexioEventHandler[] handler, FlexioQp[] qp) {
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

    static org.peerdirect.kernel.mm.AddressSpace ctxProcess(Host h) {
        return h.pd().context().process();
    }

    static long alloc(FlexioProcess p, long n) {
        long d = p.bufDevAlloc(n);
        assertTrue(d != 0, "heap for " + n + " bytes");
        return d;
    }

    void connect(FlexioProcess p, FlexioQp dpaQp, Host h) {
        byte[] gid = FlexioQp.gid(ctx.queryGid(1, 0));
        dpaQp.modifyToRts(h.qp().qpNum(), gid);
        new RcConnect().access(RW).minRnrTimer(1).timeout(14, 7).gid(gid).connect(h.qp(), ctx.queryPort(1).lid(), dpaQp.qpNum());
    }

    /** Sends a burst of {@code n} messages from {@code first} with their receives posted first; returns the echoes, in order. */
    static String[] burst(Host h, int first, int n, long timeoutNanos) {
        for (int i = 0; i < n; i++) {
            h.qp().postRecv(new IbvRecvWr().sge(h.buf() + 4096 + (long) (first + i) % 32 * 64, 64, h.mr().lkey()));
        }
        for (int i = 0; i < n; i++) {
            byte[] msg = ("msg-" + (first + i) + "-echo").getBytes(StandardCharsets.US_ASCII);
            long at = h.buf() + (long) (first + i) % 32 * 64;
            ctxProcess(h).write(at, msg, 0, msg.length);
            IbvSendWr w = new IbvSendWr().sge(at, msg.length, h.mr().lkey());
            w.opcode = IbvWrOpcode.SEND;
            w.wrId = first + i;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            h.qp().postSend(w);
        }
        String[] echoes = new String[n];
        int got = 0;
        int sent = 0;
        IbvWc[] wc = {new IbvWc()};
        long deadline = System.nanoTime() + timeoutNanos;
        while (got < n || sent < n) {
            int k = h.cq().poll(1, wc);
            if (k == 1) {
                assertEquals(IbvWcStatus.SUCCESS, wc[0].status, "completion " + wc[0].opcode);
                if (wc[0].opcode == org.peerdirect.ib.core.verbs.IbvWcOpcode.RECV) {
                    byte[] b = new byte[wc[0].byteLen];
                    ctxProcess(h).read(h.buf() + 4096 + (long) (first + got) % 32 * 64, b, 0, b.length);
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

    @Test
    void theHandlerEchoesEveryMessageOfBurstsRacingItsArm() {
        Host h = host();
        try (FlexioProcess p = FlexioProcess.create(ctx, echoApp(), FlexioRpcTest.ATTR)) {
            FlexioEventHandler[] eh = new FlexioEventHandler[1];
            FlexioQp[] qp = new FlexioQp[1];
            long c = dpaSide(p, ECHO, eh, qp);
            connect(p, qp[0], h);
            eh[0].run();
            for (int first = 0; first < N; first += BURST) {
                String[] echoes = burst(h, first, BURST, 30_000_000_000L);
                assertEquals(BURST, echoes.length, "every echo of the burst from " + first + " came back; " + p.crashData());
                for (int i = 0; i < BURST; i++) {
                    assertEquals(("msg-" + (first + i) + "-echo").toUpperCase(), echoes[i], "echo " + (first + i) + " in order");
                }
            }
            // the last echo can reach the host before its activation stored the count and rescheduled
            FlexioRpcTest.awaitCount(p, c + ECHOES, N);
            int activations = eh[0].activations();
            assertTrue(activations >= 1 && activations <= N, "activations " + activations + " of " + N + " messages");
            assertEquals(FlexioStatus.ERR_NO_ERROR, p.errStatusGet(), p.crashData());
        } finally {
            h.close(ctx);
        }
    }

    @Test
    void aHandlerWithoutWritebackBeforeTheDoorbellIsCaughtNamingItsLine() {
        Host h = host();
        try (FlexioProcess p = FlexioProcess.create(ctx, echoApp(), FlexioRpcTest.ATTR)) {
            FlexioEventHandler[] eh = new FlexioEventHandler[1];
            FlexioQp[] qp = new FlexioQp[1];
            dpaSide(p, ECHO_MUTANT, eh, qp);
            connect(p, qp[0], h);
            eh[0].run();
            String[] echoes = burst(h, 0, 1, 3_000_000_000L);
            assertEquals(0, echoes.length, "no echo leaves a process the memory model ended");
            assertEquals(FlexioStatus.ERR_FATAL_ERROR, p.errStatusGet());
            String ps = String.join("\n", m.dpa());
            // the site is the innermost frame of image code: with flexio-dev linked into the image, the library's store
            // (FlexioDevQueue) and doorbell (FlexioDev.outbox) lines, not the handler's own
            assertTrue(ps.contains("C1") && ps.contains("without __dpa_thread_memory_writeback before the doorbell")
                    && ps.contains("org.peerdirect.flexio.dev.FlexioDev.outbox:"), ps);
        } finally {
            h.close(ctx);
        }
    }

    /**
     * The mutant without {@code flexio_dev_cq_arm}: the CQ armed at creation wakes the handler for
     * the first message, which is echoed; the handler reschedules with its CQ not armed: C7, naming
     * the CQ's state (strict mode ends the process), and the next message is never echoed.
     */
    @Test
    void aHandlerThatDoesNotArmItsCqIsNotWokenAgain() {
        Host h = host();
        try (FlexioProcess p = FlexioProcess.create(ctx, echoApp(), FlexioRpcTest.ATTR)) {
            FlexioEventHandler[] eh = new FlexioEventHandler[1];
            FlexioQp[] qp = new FlexioQp[1];
            dpaSide(p, ECHO_NO_ARM, eh, qp);
            connect(p, qp[0], h);
            eh[0].run();
            assertEquals(List.of("MSG-0-ECHO"), List.of(burst(h, 0, 1, 30_000_000_000L)), "the first message wakes it");
            long deadline = System.nanoTime() + 20_000_000_000L;
            String t;
            while (!(t = String.join("\n", m.bf3.dpaThreads())).contains("PROCESS_ENDED")) { // strict: C7 ends the process
                assertTrue(System.nanoTime() < deadline, t);
                Thread.onSpinWait();
            }
            assertTrue(t.contains("echo_no_arm") && t.contains("not armed"), "dpa:threads shows the CQ not armed: " + t);
            String ps = String.join("\n", m.dpa());
            assertTrue(ps.contains("C7") && ps.contains("flexio_dev_cq_arm before reschedule"), ps);
            assertEquals(FlexioStatus.ERR_FATAL_ERROR, p.errStatusGet(), "strict mode: the lost wake-up ends the process");
            assertEquals(0, burst(h, 1, 1, 2_000_000_000L).length, "the second never comes back");
            assertEquals(1, eh[0].activations());
        } finally {
            h.close(ctx);
        }
    }
}
