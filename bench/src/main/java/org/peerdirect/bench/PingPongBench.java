package org.peerdirect.bench;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/**
 * The small-message round trip of {@code ibv_rc_pingpong}, two threads as two processes would
 * be: the benchmark thread is the client (post a signaled SEND, wait for its completion and for
 * the echo's RECV completion, repost the receive), a server thread echoes every message it
 * receives. {@code ring} is the reference measured in the same run: the same two threads
 * handing a sequence number back and forth through two memory words, the floor any in-process
 * transport can reach on this machine. The target: {@code rc / ring ≤ 3}.
 *
 * <p>Both sides spin with {@link Thread#onSpinWait} and nothing else: on a 2-core machine the two
 * threads own the cores, which is what the ratio is about.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class PingPongBench {

    /** Message bytes (ibv_rc_pingpong -s). */
    static final int SIZE = 64;
    static final int RECVS = 16;

    /** Two threads and two words: the reference round trip. */
    @State(Scope.Benchmark)
    public static class Ring {
        private static final VarHandle PING;
        private static final VarHandle PONG;

        static {
            try {
                MethodHandles.Lookup l = MethodHandles.lookup();
                PING = l.findVarHandle(Ring.class, "ping", long.class);
                PONG = l.findVarHandle(Ring.class, "pong", long.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        // apart by more than a cache line each way, so the two threads do not share one
        long p0, p1, p2, p3, p4, p5, p6, p7;
        volatile long ping;
        long q0, q1, q2, q3, q4, q5, q6, q7, q8, q9, q10, q11, q12, q13, q14, q15;
        volatile long pong;
        long r0, r1, r2, r3, r4, r5, r6, r7;
        long seq;
        volatile boolean stop;
        Thread echo;

        @Setup(Level.Trial)
        public void start() {
            stop = false;
            // echoes whatever ping differs from pong: only this thread writes pong, so a ping set
            // before the thread first looks is echoed too (reading an initial "last" raced with it)
            echo = Thread.ofPlatform().daemon().name("ring-echo").start(() -> {
                while (!stop) {
                    long p = (long) PING.getAcquire(this);
                    if (p != (long) PONG.getOpaque(this)) {
                        PONG.setRelease(this, p);
                    } else {
                        Thread.onSpinWait();
                    }
                }
            });
        }

        @TearDown(Level.Trial)
        public void stop() throws InterruptedException {
            stop = true;
            echo.join(5_000);
        }
    }

    /** The RC QP pair of the chosen driver, and the server thread echoing on dev1. */
    @State(Scope.Benchmark)
    public static class Rc {
        @Param({"mlx4", "mlx5"})
        public String driver;

        RdmaRig rig;
        IbvQp qp;
        IbvCq cq;
        final IbvSendWr send = new IbvSendWr();
        final IbvRecvWr recv = new IbvRecvWr();
        final IbvWc[] wc = {new IbvWc()};
        volatile boolean stop;
        final AtomicReference<Throwable> serverFailure = new AtomicReference<>();
        Thread server;

        @Setup(Level.Trial)
        public void setup() throws Exception {
            rig = new RdmaRig(driver, 64L << 20, 1L << 20, 1, 4 * RECVS);
            RdmaRig.Conn c = rig.conns[0];
            qp = c.aqp;
            cq = c.acq;
            send.sge(rig.a.buf, SIZE, rig.a.mr.lkey());
            send.opcode = IbvWrOpcode.SEND;
            send.sendFlags = IbvSendWr.SEND_SIGNALED;
            recv.sge(rig.a.buf + 4096, SIZE, rig.a.mr.lkey());
            for (int i = 0; i < RECVS; i++) {
                qp.postRecv(recv);
            }
            IbvSendWr echo = new IbvSendWr().sge(rig.b.buf, SIZE, rig.b.mr.lkey());
            echo.opcode = IbvWrOpcode.SEND;
            echo.sendFlags = IbvSendWr.SEND_SIGNALED;
            IbvRecvWr srecv = new IbvRecvWr().sge(rig.b.buf + 4096, SIZE, rig.b.mr.lkey());
            for (int i = 0; i < RECVS; i++) {
                c.bqp.postRecv(srecv);
            }
            stop = false;
            server = Thread.ofPlatform().daemon().name("pingpong-server").start(() -> {
                IbvWc[] swc = {new IbvWc()};
                try {
                    while (!stop) {
                        int k = c.bcq.poll(1, swc);
                        if (k == 0) {
                            Thread.onSpinWait();
                            continue;
                        }
                        if (k < 0 || swc[0].status != IbvWcStatus.SUCCESS) {
                            throw new IllegalStateException("server: " + (k < 0 ? "CQ in error" : swc[0].toString()));
                        }
                        if (swc[0].opcode == IbvWcOpcode.RECV) {
                            c.bqp.postRecv(srecv);
                            c.bqp.postSend(echo); // echo what arrived
                        }
                    }
                } catch (Throwable t) {
                    serverFailure.set(t);
                }
            });
        }

        @TearDown(Level.Trial)
        public void tearDown() throws Exception {
            stop = true;
            server.join(5_000);
            rig.close();
            if (serverFailure.get() != null) {
                throw new IllegalStateException("the echo server failed", serverFailure.get());
            }
        }
    }

    /**
     * The same QP pair and messages with no second thread: one thread posts the SEND, polls the
     * server's CQ, reposts and echoes, then polls both client completions. What is left of
     * {@code rc} beyond this is the cost of two cores handing the work back and forth (cache
     * lines and atomics crossing between them), not of the model's work.
     */
    @State(Scope.Benchmark)
    public static class Serial {
        @Param({"mlx4", "mlx5"})
        public String driver;

        RdmaRig rig;
        RdmaRig.Conn c;
        final IbvSendWr send = new IbvSendWr();
        final IbvRecvWr recv = new IbvRecvWr();
        final IbvSendWr echo = new IbvSendWr();
        final IbvRecvWr srecv = new IbvRecvWr();
        final IbvWc[] wc = {new IbvWc()};

        @Setup(Level.Trial)
        public void setup() throws Exception {
            rig = new RdmaRig(driver, 64L << 20, 1L << 20, 1, 4 * RECVS);
            c = rig.conns[0];
            send.sge(rig.a.buf, SIZE, rig.a.mr.lkey());
            send.opcode = IbvWrOpcode.SEND;
            send.sendFlags = IbvSendWr.SEND_SIGNALED;
            recv.sge(rig.a.buf + 4096, SIZE, rig.a.mr.lkey());
            echo.sge(rig.b.buf, SIZE, rig.b.mr.lkey());
            echo.opcode = IbvWrOpcode.SEND;
            echo.sendFlags = IbvSendWr.SEND_SIGNALED;
            srecv.sge(rig.b.buf + 4096, SIZE, rig.b.mr.lkey());
            for (int i = 0; i < RECVS; i++) {
                c.aqp.postRecv(recv);
                c.bqp.postRecv(srecv);
            }
        }

        @TearDown(Level.Trial)
        public void tearDown() throws Exception {
            rig.close();
        }

        /** Polls {@code cq} until it gives {@code n} successful completions; returns the last RECV's length. */
        int take(IbvCq cq, int n, IbvQp repost, IbvRecvWr rwr) {
            int len = 0;
            long empty = 0;
            for (int got = 0; got < n; ) {
                int k = cq.poll(1, wc);
                if (k == 0) {
                    if (++empty > 100_000_000L) { // everything runs on this thread: an empty CQ now stays empty
                        throw new IllegalStateException("no completion after " + empty + " polls");
                    }
                    continue;
                }
                if (k < 0 || wc[0].status != IbvWcStatus.SUCCESS) {
                    throw new IllegalStateException(k < 0 ? "CQ in error" : wc[0].toString());
                }
                if (wc[0].opcode == IbvWcOpcode.RECV) {
                    len = wc[0].byteLen;
                    repost.postRecv(rwr);
                }
                got++;
            }
            return len;
        }
    }

    /** {@link #rc}'s round trip on one thread (see {@link Serial}). */
    @Benchmark
    public int serial(Serial s) {
        s.c.aqp.postSend(s.send);
        s.take(s.c.bcq, 1, s.c.bqp, s.srecv);
        s.c.bqp.postSend(s.echo);
        s.take(s.c.bcq, 1, s.c.bqp, s.srecv); // the echo's send completion
        return s.take(s.c.acq, 2, s.c.aqp, s.recv);
    }

    @Benchmark
    public long ring(Ring r) {
        long s = ++r.seq;
        Ring.PING.setRelease(r, s);
        while ((long) Ring.PONG.getAcquire(r) != s) {
            Thread.onSpinWait();
        }
        return s;
    }

    /** One round trip: the SEND's completion and the echo's RECV completion, in either order. */
    @Benchmark
    public int rc(Rc r) {
        r.qp.postSend(r.send);
        int got = 0;
        int recvLen = 0;
        while (got < 2) {
            int k = r.cq.poll(1, r.wc);
            if (k == 0) {
                if (r.serverFailure.get() != null) {
                    throw new IllegalStateException("the echo server failed", r.serverFailure.get());
                }
                Thread.onSpinWait();
                continue;
            }
            IbvWc c = r.wc[0];
            if (k < 0 || c.status != IbvWcStatus.SUCCESS) {
                throw new IllegalStateException("client: " + (k < 0 ? "CQ in error" : c.toString()));
            }
            if (c.opcode == IbvWcOpcode.RECV) {
                recvLen = c.byteLen;
                r.qp.postRecv(r.recv);
            }
            got++;
        }
        return recvLen;
    }
}
