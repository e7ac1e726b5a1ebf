package org.peerdirect.bench;

import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.example.peermem.ExamplePeerMemory;

/**
 * Registration and release of 1 GiB: {@code peerUmem1GiB} through the example peer client
 * (4 KiB or 64 KiB peer pages; get_pages, dma_map of 262 144 frames, the scatter table, arm,
 * stop, dma_unmap, put_pages, release) against {@code pinnedUmem1GiB}, the pinned path over
 * resident anonymous memory (pin 262 144 pages, dma_map, unmap, unpin), in the same run.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xmx4g"})
public class PeerUmemBench {

    static final long GIB = 1L << 30;

    @Param({"4096", "65536"})
    public long peerPageSize;

    private PeerRig rig;
    private long peer;
    private long anon;

    @Setup
    public void setup() throws Exception {
        rig = new PeerRig(2 * GIB + (64L << 20));
        ExamplePeerMemory client = new ExamplePeerMemory(rig.mm, "bench_peer", peerPageSize, false);
        rig.controller.register(client, true);
        peer = client.alloc(rig.as.pid(), GIB);
        anon = rig.as.mmap(GIB);
        rig.as.populate(anon, GIB, true);
    }

    @TearDown
    public void tearDown() throws Exception {
        rig.close();
    }

    @Benchmark
    public long peerUmem1GiB() {
        return rig.regDereg(peer, GIB);
    }

    @Benchmark
    public long pinnedUmem1GiB() {
        return rig.regDereg(anon, GIB);
    }
}
