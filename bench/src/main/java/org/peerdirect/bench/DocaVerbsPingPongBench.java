package org.peerdirect.bench;

import static org.peerdirect.bench.dpa.DocaVerbsPingPongDev.*;

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
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.bench.dpa.DocaVerbsPingPongDevStubs;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.verbs.DocaVerbsAhAttr;
import org.peerdirect.doca.verbs.DocaVerbsQp;
import org.peerdirect.doca.verbs.DocaVerbsQpAttr;
import org.peerdirect.doca.verbs.DocaVerbsQpInitAttr;
import org.peerdirect.flexio.FlexioQp;

/**
 * Issue 43's DPA verbs figure: {@link DocaPingPongBench}'s round trip of an 8-byte SEND between two
 * DPA threads on one BlueField-3, on DOCA verbs QPs ({@code doca-verbs}, DPA_MODEL.md §4 scenario
 * 8's API: post + commit, unsignaled sends) instead of DOCA RDMA connections. Run both in one JMH
 * command for the ratio of the two device APIs, with the host RC round trip as reference:
 *
 * <pre>./peerdirect bench -f 1 'DocaVerbsPingPongBench|DocaPingPongBench|PingPongBench.rc'</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class DocaVerbsPingPongBench {

    static final int ROUNDS = 100;

    /** The rig ({@link DocaRig}) with the bench's verbs program and the two sides of the exchange. */
    @State(Scope.Benchmark)
    public static class Host {
        DocaRig rig;
        long pingArg;
        long pongArg;

        @Setup(Level.Trial)
        public void up() throws Exception {
            rig = new DocaRig("doca-verbs-ping-pong-bench", DocaVerbsPingPongDevStubs.APP, true);
            long[] args = {side(true), side(false)};
            pingArg = args[0];
            pongArg = args[1];
            connect(qps.get(0), qps.get(1).getQpn());
            connect(qps.get(1), qps.get(0).getQpn());
            threads.forEach(DocaDpaThread::run);
            rig.dpa.rpc(DocaVerbsPingPongDevStubs.START, args[0], args[1]);
        }

        final List<DocaVerbsQp> qps = new ArrayList<>();
        final List<DocaDpaThread> threads = new ArrayList<>();

        private long side(boolean ping) {
            long arg = rig.alloc(SIZE);
            long recv = rig.alloc(64);
            long send = rig.alloc(64);
            DocaDpaThread t = DocaDpaThread.create(rig.dpa);
            rig.undo.add(t::destroy);
            t.setFuncArg(DocaVerbsPingPongDevStubs.PING_PONG, arg);
            t.start();
            DocaDpaCompletion c = DocaDpaCompletion.create(rig.dpa, 16);
            rig.undo.add(c::destroy);
            c.setThread(t);
            c.start();
            DocaVerbsQpInitAttr ia = DocaVerbsQpInitAttr.create();
            ia.setExternalDatapathEn(true);
            ia.setPd(rig.dev);
            ia.setSqWr(8);
            ia.setRqWr(4);
            ia.setSendDpaCompletion(c);
            ia.setReceiveDpaCompletion(c);
            DocaVerbsQp qp = DocaVerbsQp.create(rig.dev, ia);
            rig.undo.add(qp::destroy);
            ByteBuffer b = ByteBuffer.allocate(SIZE).order(ByteOrder.LITTLE_ENDIAN);
            b.putLong(COMP, c.getDpaHandle()).putLong(QP, qp.getDpaHandle(rig.dpa)).putLong(RECV, recv).putLong(RECV_KEY, rig.key(recv))
                    .putLong(SEND, send).putLong(SEND_KEY, rig.key(send)).putLong(IS_PING, ping ? 1 : 0).putLong(COUNT, 0);
            rig.dpa.h2dMemcpy(arg, b.array());
            qps.add(qp);
            threads.add(t);
            return arg;
        }

        /** RESET→INIT→RTR→RTS towards {@code remote} in loopback, DOCA's sample's masks. */
        private void connect(DocaVerbsQp qp, int remote) {
            DocaVerbsAhAttr ah = DocaVerbsAhAttr.create(rig.dev);
            ah.setGid(FlexioQp.gid(rig.dev.ibvContext().queryGid(1, 0)));
            DocaVerbsQpAttr a = DocaVerbsQpAttr.create();
            a.setNextState(DocaVerbsQpAttr.QP_STATE_INIT);
            a.setPortNum(1);
            qp.modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.PKEY_INDEX | DocaVerbsQpAttr.PORT_NUM);
            a.setNextState(DocaVerbsQpAttr.QP_STATE_RTR);
            a.setDestQpNum(remote);
            a.setAhAttr(ah);
            qp.modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.RQ_PSN | DocaVerbsQpAttr.DEST_QP_NUM | DocaVerbsQpAttr.MIN_RNR_TIMER
                    | DocaVerbsQpAttr.PATH_MTU | DocaVerbsQpAttr.AH_ATTR);
            a.setNextState(DocaVerbsQpAttr.QP_STATE_RTS);
            a.setAckTimeout(14);
            a.setRetryCnt(7);
            a.setRnrRetry(7);
            qp.modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.SQ_PSN | DocaVerbsQpAttr.ACK_TIMEOUT | DocaVerbsQpAttr.RETRY_CNT
                    | DocaVerbsQpAttr.RNR_RETRY);
        }

        long count() {
            return rig.word(pingArg + COUNT);
        }

        @TearDown(Level.Trial)
        public void down() {
            try { // the threads finish first (the program's stop word): the QPs go only once no thread can post on them
                rig.stopThreads(new long[] {pingArg + STOP, pongArg + STOP}, new long[] {pingArg + DONE, pongArg + DONE});
            } finally {
                rig.close();
            }
        }
    }

    /** {@link #ROUNDS} round trips of the free-running exchange; JMH divides by them. */
    @Benchmark
    @OperationsPerInvocation(ROUNDS)
    public long dpaVerbsRoundTrip(Host h) {
        return h.rig.awaitRounds(h::count, ROUNDS);
    }
}
