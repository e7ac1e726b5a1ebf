package org.peerdirect.bench;

import java.util.concurrent.TimeUnit;

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
import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/**
 * SEND of {@value #SIZE} bytes over one RC QP, dev0 to dev1: the peer keeps {@value #RECVS}
 * receives posted; each operation posts one signaled send, polls its completion on the sender's
 * CQ, polls the receive completion on the peer's CQ and reposts that receive. The score is the
 * time of one message (post, delivery, both completions, repost). {@code send} goes through the
 * lkey (DMA read of the source); {@code sendInline} copies the payload into the WQE at post time.
 * Compare with {@link MemoryCopyBench} at 64 B. Reused requests and completion arrays: the loop
 * allocates nothing.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class RdmaSendBench {

    static final int SIZE = 64;
    static final int RECVS = 32;

    /** mlx4 (ConnectX-3: queues as objects) or mlx5 (ConnectX-4: WQEs and CQEs by DMA through memory). */
    @Param({"mlx4", "mlx5"})
    public String driver;

    private RdmaRig rig;
    private IbvQp sqp;
    private IbvCq scq;
    private IbvQp rqp;
    private IbvCq rcq;
    private final IbvSendWr wr = new IbvSendWr();
    private final IbvSendWr inl = new IbvSendWr();
    private final IbvRecvWr rwr = new IbvRecvWr();
    private final IbvWc[] swc = {new IbvWc()};
    private final IbvWc[] rwc = {new IbvWc()};

    @Setup(Level.Trial)
    public void setup() throws Exception {
        rig = new RdmaRig(driver, 64L << 20, 1L << 20, 1, 4 * RECVS);
        RdmaRig.Conn c = rig.conns[0];
        sqp = c.aqp;
        scq = c.acq;
        rqp = c.bqp;
        rcq = c.bcq;
        wr.sge(rig.a.buf, SIZE, rig.a.mr.lkey());
        wr.opcode = IbvWrOpcode.SEND;
        wr.sendFlags = IbvSendWr.SEND_SIGNALED;
        inl.sge(rig.a.buf, SIZE, rig.a.mr.lkey());
        inl.opcode = IbvWrOpcode.SEND;
        inl.sendFlags = IbvSendWr.SEND_SIGNALED | IbvSendWr.SEND_INLINE;
        for (int i = 0; i < RECVS; i++) {
            repost(i);
        }
    }

    /** Receive {@code slot} goes back to the RQ: its own 64-byte slice of the peer's buffer. */
    private void repost(long slot) {
        rwr.wrId = slot;
        rwr.sge(rig.b.buf + slot * SIZE, SIZE, rig.b.mr.lkey());
        rqp.postRecv(rwr);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        rig.close();
    }

    private long roundTrip(IbvSendWr w) {
        sqp.postSend(w);
        RdmaRig.pollOne(scq, swc);
        IbvWc r = RdmaRig.pollOne(rcq, rwc);
        if (r.opcode != IbvWcOpcode.RECV || r.byteLen != SIZE) {
            throw new IllegalStateException("unexpected receive completion: " + r);
        }
        long slot = r.wrId;
        repost(slot);
        return slot;
    }

    @Benchmark
    public long send() {
        return roundTrip(wr);
    }

    @Benchmark
    public long sendInline() {
        return roundTrip(inl);
    }
}
