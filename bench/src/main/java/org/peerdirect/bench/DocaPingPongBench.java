package org.peerdirect.bench;

import static org.peerdirect.dpa.samples.dev.PingPongDev.*;
import static org.peerdirect.bench.DocaRig.RW;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.dpa.samples.dev.PingPongDevStubs;

/**
 * Issue 43's DPA ping-pong figure (DPA_MODEL.md §4 scenario 7, DOCA's {@code dpa_ping_pong}): the
 * round trip of an 8-byte SEND between two DPA threads on one BlueField-3, each with its DOCA RDMA
 * context (data path on the DPA) and its completion context, polled, never rescheduling. The device
 * program is the sample's own (dpa-samples' {@code PingPongDev}) run free: its {@code TLS_ROUNDS}
 * set, no thread logs and none ends before the teardown's stop word, ping counts each round trip there with an atomic. The exchange runs
 * free once started; an invocation waits for {@link #ROUNDS} more round trips (the count, read by
 * the host's d2h copies), so the score is one round trip. Its reference is {@link PingPongBench}'s
 * host RC round trip ({@code rc}) in the same JMH command.
 *
 * <pre>./peerdirect bench -f 1 'DocaPingPongBench|PingPongBench.rc'</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class DocaPingPongBench {

    static final int ROUNDS = 100;

    /** The rig ({@link DocaRig}) with the sample's program and the two sides of the exchange. */
    @State(Scope.Benchmark)
    public static class Host {
        DocaRig rig;
        /** Where ping counts its round trips. */
        long rounds;
        final List<DocaRdma> rdmas = new ArrayList<>();
        final List<DocaDpaThread> threads = new ArrayList<>();
        /** The DPA's polls of unchanged memory wait for a write (the model's default) or spin (the A/B of what waiting saves). */
        @Param({"true", "false"})
        boolean elidePolls;

        @Setup(Level.Trial)
        public void up() throws Exception {
            rig = new DocaRig("doca-ping-pong-bench", PingPongDevStubs.APP, elidePolls);
            rounds = rig.alloc(64);
            long[] args = {side(true), side(false)};
            DocaRdma ping = rdmas.get(0);
            DocaRdma pong = rdmas.get(1);
            DocaRdma.Export a = ping.export();
            DocaRdma.Export b = pong.export();
            ping.connect(b.connectionDetails(), a.connection());
            pong.connect(a.connectionDetails(), b.connection());
            threads.forEach(DocaDpaThread::run);
            rig.dpa.rpc(PingPongDevStubs.TRIGGER_FIRST_ITERATION_RPC, args[0], args[1]);
        }

        /** A side as {@code DpaPingPongTest} builds it, its TLS run free; no sync event (the exchange never ends). Returns its argument block. */
        private long side(boolean ping) {
            long values = rig.alloc(4L * ITERATIONS);
            long tls = rig.alloc(TLS_SIZE);
            ByteBuffer t = ByteBuffer.allocate(TLS_SIZE).order(ByteOrder.LITTLE_ENDIAN);
            t.putLong(TLS_VALUES, values).putLong(TLS_IS_PING, ping ? 1 : 0).putLong(TLS_ROUNDS, rounds);
            rig.dpa.h2dMemcpy(tls, t.array());
            long arg = rig.alloc(PP_SIZE);
            DocaDpaThread th = DocaDpaThread.create(rig.dpa);
            rig.undo.add(th::destroy);
            th.setFuncArg(PingPongDevStubs.THREAD_KERNEL, arg);
            th.setLocalStorage(tls);
            th.start();
            DocaDpaCompletion c = DocaDpaCompletion.create(rig.dpa, 16);
            rig.undo.add(c::destroy);
            c.setThread(th);
            c.start();
            DocaRdma r = DocaRdma.create(rig.dev);
            r.setPermissions(RW);
            r.setDatapathOnDpa(rig.dpa);
            r.setRecvQueueSize(4);
            r.setSendQueueSize(8);
            r.dpaCompletionAttach(c);
            r.start();
            rig.undo.add(r::destroy);
            long recv = rig.alloc(64);
            long send = rig.alloc(64);
            ByteBuffer b = ByteBuffer.allocate(PP_SIZE).order(ByteOrder.LITTLE_ENDIAN);
            b.putLong(PP_COMP, c.getDpaHandle()).putLong(PP_RDMA, r.getDpaHandle()).putLong(PP_RECV, recv).putLong(PP_RECV_MMAP, rig.key(recv))
                    .putLong(PP_RECV_LEN, 8).putLong(PP_SEND, send).putLong(PP_SEND_MMAP, rig.key(send)).putLong(PP_SEND_LEN, 8);
            rig.dpa.h2dMemcpy(arg, b.array());
            rdmas.add(r);
            threads.add(th);
            return arg;
        }

        long count() {
            return rig.word(rounds);
        }

        @TearDown(Level.Trial)
        public void down() {
            try { // the threads finish first (PingPongDev's stop word): the RDMA contexts go only once no thread can post on them
                rig.stopThreads(new long[] {rounds + RUN_STOP}, new long[] {rounds + RUN_PING_DONE, rounds + RUN_PONG_DONE});
            } finally {
                rig.close();
            }
        }
    }

    /** {@link #ROUNDS} round trips of the free-running exchange; JMH divides by them. */
    @Benchmark
    @OperationsPerInvocation(ROUNDS)
    public long dpaRoundTrip(Host h) {
        return h.rig.awaitRounds(h::count, ROUNDS);
    }
}
