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
 * Cost of brokering: a 64 KiB peer registration cycle when the owning client is the only one
 * ({@code clients=1}) against when nine clients that decline are asked before it
 * ({@code clients=10}); the ratio of the two is the brokering cost.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class PeerBrokerBench {

    @Param({"1", "10"})
    public int clients;

    private PeerRig rig;
    private long va;

    @Setup
    public void setup() throws Exception {
        rig = new PeerRig(64L << 20);
        for (int i = 1; i < clients; i++) {
            ExamplePeerMemory other = new ExamplePeerMemory(rig.mm, "other" + i, 4096, false);
            other.alloc(rig.as.pid(), 1 << 16); // owns memory, just not this range
            rig.controller.register(other, true);
        }
        ExamplePeerMemory owner = new ExamplePeerMemory(rig.mm, "owner", 4096, false);
        rig.controller.register(owner, true);
        va = owner.alloc(rig.as.pid(), 1 << 16);
    }

    @TearDown
    public void tearDown() throws Exception {
        rig.close();
    }

    @Benchmark
    public long register64KiB() {
        return rig.regDereg(va, 1 << 16);
    }
}
