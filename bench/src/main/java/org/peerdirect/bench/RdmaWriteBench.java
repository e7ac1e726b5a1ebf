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
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;

/**
 * RDMA WRITE over one RC QP, dev0 to dev1 (loopback on one fabric, both IOMMU domains crossed).
 * {@code write}: a batch of {@value #BATCH} writes of {@code size} bytes, only the last one
 * signaled, then the CQ polled for it: the score is per write, so {@code size / score} is the
 * bandwidth and {@code 1 / score} the message rate. {@code writeLatency}: one signaled write and its
 * completion per operation. Compare with {@link MemoryCopyBench} at the same size, in the same run.
 * The same source and destination ranges are used every time, as in MemoryCopyBench. One
 * {@link IbvSendWr} and one {@link IbvWc} array are reused: the loop allocates nothing.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class RdmaWriteBench {

    /** Writes per invocation of {@link #write}; only the last is signaled. */
    static final int BATCH = 16;

    /** Bytes per write: 64 B, 4 KiB, 64 KiB. */
    @Param({"64", "4096", "65536"})
    public int size;

    /**
     * mlx4 (ConnectX-3: queues as objects), mlx5 (ConnectX-4: WQEs and CQEs by DMA through memory),
     * mlx5-odp (the same with ODP MRs, every page resident and mapped: the ODP issue's ratio to mlx5),
     * mlx5-gpu (the target buffer in a GPU's memory through nv_mem, every byte through BAR1: the
     * GPU issue's ratio to mlx5), mlx5-roce (two ConnectX-6 Dx on the in-JVM fabric, by GID) and
     * mlx5-wire (the same two joined by a UDP tunnel on the loopback: RoCEv2 frames, the wire's
     * ratio to mlx5-roce).
     */
    @Param({"mlx4", "mlx5", "mlx5-odp", "mlx5-gpu", "mlx5-gpu-dmabuf", "mlx5-roce", "mlx5-wire"})
    public String driver;

    private RdmaRig rig;
    private IbvQp qp;
    private IbvCq cq;
    private final IbvSendWr wr = new IbvSendWr();
    private final IbvWc[] wc = {new IbvWc()};

    @Setup(Level.Trial)
    public void setup() throws Exception {
        rig = new RdmaRig(driver, 64L << 20, 1L << 20, 1, 4 * BATCH);
        RdmaRig.Conn c = rig.conns[0];
        qp = c.aqp;
        cq = c.acq;
        rig.firstWrite(wr, size, qp, cq, wc);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        rig.close();
    }

    @Benchmark
    @OperationsPerInvocation(BATCH)
    public long write() {
        IbvSendWr w = wr;
        w.sendFlags = 0;
        for (int i = 0; i < BATCH - 1; i++) {
            w.wrId = i;
            qp.postSend(w);
        }
        w.wrId = BATCH - 1;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        qp.postSend(w);
        return RdmaRig.pollOne(cq, wc).wrId;
    }

    @Benchmark
    public long writeLatency() {
        IbvSendWr w = wr;
        w.wrId = 1;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        qp.postSend(w);
        return RdmaRig.pollOne(cq, wc).wrId;
    }
}
