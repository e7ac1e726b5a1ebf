package org.peerdirect.bench;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.DatagramChannel;
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
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;

/**
 * RoCEv2 on the UDP link against the floor the link sets (issue 44's performance part), in one
 * run: {@code ring} is a 64-byte UDP round trip between this thread and an echo thread over the
 * loopback (two datagrams, two wake-ups: what one request and its ACK cost at least);
 * {@code writeLat} is one signaled 64-byte RDMA WRITE and its completion between two ConnectX-6 Dx
 * joined by a UDP tunnel (the WRITE, its ACK); {@code messageRate} is a batch of {@value #BATCH}
 * 64-byte WRITEs with only the last signaled (the send window keeps them in flight together), per
 * WRITE. {@code writeLat / ring} is the engine's cost over the link's. With {@code -prof gc},
 * {@code gc.alloc.rate.norm} divided by the packets per operation (writeLat: 2, messageRate: about
 * 1 + the coalesced ACKs) is the packet path's allocation per packet.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class WireBench {

    static final int BATCH = 16;
    static final int SIZE = 64;

    private RdmaRig rig;
    private IbvQp qp;
    private IbvCq cq;
    private final IbvSendWr wr = new IbvSendWr();
    private final IbvWc[] wc = {new IbvWc()};

    // the ring: this thread's socket, the echo thread's, one direct buffer each (nothing allocated per trip)
    private DatagramChannel mine;
    private DatagramChannel echo;
    private Thread echoThread;
    private final ByteBuffer out = ByteBuffer.allocateDirect(SIZE);
    private final ByteBuffer in = ByteBuffer.allocateDirect(2048);
    private InetSocketAddress echoAt;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        rig = new RdmaRig("mlx5-wire", 64L << 20, 1L << 20, 1, 4 * BATCH);
        RdmaRig.Conn c = rig.conns[0];
        qp = c.aqp;
        cq = c.acq;
        rig.firstWrite(wr, SIZE, qp, cq, wc);
        InetAddress lo = InetAddress.getLoopbackAddress();
        echo = DatagramChannel.open().bind(new InetSocketAddress(lo, 0));
        mine = DatagramChannel.open().bind(new InetSocketAddress(lo, 0));
        echoAt = (InetSocketAddress) echo.getLocalAddress();
        mine.connect(echoAt);
        echo.connect(mine.getLocalAddress());
        echoThread = Thread.ofPlatform().daemon().name("ring-echo").start(() -> {
            ByteBuffer b = ByteBuffer.allocateDirect(2048);
            try {
                while (true) {
                    b.clear();
                    echo.read(b);
                    b.flip();
                    echo.write(b);
                }
            } catch (ClosedChannelException end) {
                // the trial is over
            } catch (IOException e) {
                throw new IllegalStateException("ring echo", e);
            }
        });
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        echo.close();
        mine.close();
        echoThread.join(5_000);
        rig.close();
    }

    /** One 64-byte UDP datagram to the echo thread and back. */
    @Benchmark
    public int ring() throws IOException {
        out.clear();
        mine.write(out);
        in.clear();
        return mine.read(in);
    }

    /** One signaled 64-byte RDMA WRITE over the UDP link and its completion. */
    @Benchmark
    public long writeLat() {
        IbvSendWr w = wr;
        w.wrId = 1;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        qp.postSend(w);
        return RdmaRig.pollOne(cq, wc).wrId;
    }

    /** {@value #BATCH} 64-byte WRITEs, the last signaled: the score is per WRITE (its inverse the message rate). */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public long messageRate() {
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
}
