package org.peerdirect.bench;

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
import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.umemtest.UmemTestDevice.Mr;
import org.peerdirect.peermem.PeerMemoryRegistration;

/**
 * 10 000 live registrations (4 KiB each) of one client: {@code invalidate} invalidates them one
 * by one (ticket lookup, the fence, the driver's revoke, dma_unmap, put_pages); the score is per
 * registration. Reference in the same run: {@code deregister}, the driver's own deregistration
 * of the same 10 000 (revoke, stop, unmap, release).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 5)
@Measurement(iterations = 10)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class PeerInvalidateBench {

    static final int MRS = 10_000;

    private PeerRig rig;
    private PeerMemoryRegistration reg;
    private long region;
    private final List<Mr> mrs = new ArrayList<>();

    @Setup
    public void setup() throws Exception {
        rig = new PeerRig(256L << 20);
        ExamplePeerMemory client = new ExamplePeerMemory(rig.mm, "bench_peer", 4096, false);
        reg = rig.controller.register(client, true);
        region = client.alloc(rig.as.pid(), MRS * 4096L);
    }

    @Setup(Level.Invocation)
    public void registerAll() {
        for (int i = 0; i < MRS; i++) {
            mrs.add(rig.dev.reg(rig.as, region + i * 4096L, 4096, PeerRig.RW));
        }
    }

    @TearDown(Level.Invocation)
    public void deregisterLeft() {
        for (Mr mr : rig.dev.mrs()) {
            rig.dev.dereg(mr);
        }
        mrs.clear();
    }

    @TearDown
    public void tearDown() throws Exception {
        rig.close();
    }

    @Benchmark
    @OperationsPerInvocation(MRS)
    public void invalidate() {
        for (Mr mr : mrs) {
            reg.invalidate(mr.umem().ticket());
        }
    }

    @Benchmark
    @OperationsPerInvocation(MRS)
    public void deregister() {
        for (Mr mr : mrs) {
            rig.dev.dereg(mr);
        }
    }
}
