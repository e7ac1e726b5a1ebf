package org.peerdirect.bench;

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
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.ThreadParams;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/**
 * RDMA WRITE of {@code size} bytes (4 KiB) over {@code qps} RC connections dev0 to dev1, each QP
 * with its own CQ and its own source and destination range. An invocation posts {@value #WRITES}
 * signaled writes round-robin over the thread's QPs, then polls their {@value #WRITES} completions:
 * the score is per write. {@code write} runs in one thread (all {@code qps} QPs);
 * {@code write2Threads} in two, thread t owning the QPs i with {@code i % min(2, qps) == t} (with
 * one QP both threads share it and its CQ). In AverageTime mode with two threads the score is each
 * thread's time per write: the aggregate rate is 2 / score. Compare with {@link RdmaWriteBench}
 * at 4096 and {@link MemoryCopyBench} at 4096, in the same run.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class RdmaScalingBench {

    /** Writes per invocation (a multiple of every qps value: each QP gets the same share). */
    static final int WRITES = 8;

    /** The connections, shared by the benchmark's threads. */
    @State(Scope.Benchmark)
    public static class Rig {
        @Param({"1", "2", "4", "8"})
        public int qps;

        /** Bytes per write (also lets the summary print GB/s). */
        @Param({"4096"})
        public int size;

        RdmaRig rig;

        @Setup(Level.Trial)
        public void setup() throws Exception {
            rig = new RdmaRig(64L << 20, 1L << 20, qps, 4 * WRITES);
        }

        @TearDown(Level.Trial)
        public void tearDown() throws Exception {
            rig.close();
        }
    }

    /** One thread's view: for each write slot its QP, CQ, local and remote address; reused request and completion. */
    @State(Scope.Thread)
    public static class Worker {
        final IbvQp[] qp = new IbvQp[WRITES];
        final IbvCq[] cq = new IbvCq[WRITES];
        final long[] local = new long[WRITES];
        final long[] remote = new long[WRITES];
        final IbvSendWr wr = new IbvSendWr();
        final IbvWc[] wc = {new IbvWc()};
        int size;

        @Setup(Level.Trial)
        public void setup(Rig r, ThreadParams tp) {
            RdmaRig rig = r.rig;
            size = r.size;
            int groups = Math.min(tp.getThreadCount(), r.qps);
            int me = tp.getThreadIndex() % groups;
            int mine = 0;
            int[] conns = new int[r.qps];
            for (int i = 0; i < r.qps; i++) {
                if (i % groups == me) {
                    conns[mine++] = i;
                }
            }
            for (int j = 0; j < WRITES; j++) {
                int i = conns[j % mine];
                qp[j] = rig.conns[i].aqp;
                cq[j] = rig.conns[i].acq;
                local[j] = rig.a.buf + (long) i * size;
                remote[j] = rig.b.buf + (long) i * size;
            }
            wr.sge(rig.a.buf, size, rig.a.mr.lkey());
            wr.opcode = IbvWrOpcode.RDMA_WRITE;
            wr.sendFlags = IbvSendWr.SEND_SIGNALED;
            wr.rkey = rig.b.mr.rkey();
        }

        long run() {
            IbvSendWr w = wr;
            int lkey = w.sgList[0].lkey;
            for (int j = 0; j < WRITES; j++) {
                w.wrId = j;
                w.sgList[0].set(local[j], size, lkey);
                w.remoteAddr = remote[j];
                qp[j].postSend(w);
            }
            long sum = 0;
            for (int j = 0; j < WRITES; j++) {
                sum += RdmaRig.pollOne(cq[j], wc).wrId;
            }
            return sum;
        }
    }

    @Benchmark
    @OperationsPerInvocation(WRITES)
    public long write(Worker w) {
        return w.run();
    }

    @Benchmark
    @Threads(2)
    @OperationsPerInvocation(WRITES)
    public long write2Threads(Worker w) {
        return w.run();
    }
}
