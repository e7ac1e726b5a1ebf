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
import org.peerdirect.hca.dpa.DpaConfig;

/**
 * Issue 43's A/B of {@link DpaConfig#pollSpin} in one JMH run: {@link DocaPingPongBench}'s round
 * trip and {@link DocaDpaBench}'s activations with the DPA's harts parking at once ({@code 0}) or
 * spinning first, beside {@link DocaDpaBench#ringHandOff} (the machine's park/unpark hand-off).
 * The rigs are those benches' own; each makes its device after this state set the spin
 * ({@value DpaConfig#POLL_SPIN_PROPERTY}, cleared again at tear-down).
 *
 * <pre>./peerdirect bench -f 1 DpaSpinBench</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class DpaSpinBench {

    /** {@link DocaPingPongBench.Host} with polls elided and the spin of {@link #pollSpinNanos}. */
    @State(Scope.Benchmark)
    public static class PingPong {
        @Param({"0", "20000"})
        long pollSpinNanos;
        final DocaPingPongBench.Host host = new DocaPingPongBench.Host();

        @Setup(Level.Trial)
        public void up() throws Exception {
            System.setProperty(DpaConfig.POLL_SPIN_PROPERTY, Long.toString(pollSpinNanos));
            host.elidePolls = true;
            host.up();
        }

        @TearDown(Level.Trial)
        public void down() throws Exception {
            host.down();
            System.clearProperty(DpaConfig.POLL_SPIN_PROPERTY);
        }
    }

    /** {@link DocaDpaBench.Host} with the spin of {@link #pollSpinNanos}. */
    @State(Scope.Benchmark)
    public static class Workers {
        @Param({"0", "20000"})
        long pollSpinNanos;
        final DocaDpaBench.Host host = new DocaDpaBench.Host();

        @Setup(Level.Trial)
        public void up() throws Exception {
            System.setProperty(DpaConfig.POLL_SPIN_PROPERTY, Long.toString(pollSpinNanos));
            host.up();
        }

        @TearDown(Level.Trial)
        public void down() throws Exception {
            host.down();
            System.clearProperty(DpaConfig.POLL_SPIN_PROPERTY);
        }
    }

    /** The benches' own operations (stateless instances: their state is the rigs above). */
    private static final DocaPingPongBench PING_PONG = new DocaPingPongBench();
    private static final DocaDpaBench DPA = new DocaDpaBench();

    @Benchmark
    @OperationsPerInvocation(DocaPingPongBench.ROUNDS)
    public long dpaRoundTrip(PingPong p) {
        return PING_PONG.dpaRoundTrip(p.host);
    }

    @Benchmark
    @OperationsPerInvocation(DocaDpaBench.WORKERS)
    public long activations(Workers w) {
        return DPA.activations(w.host);
    }

    @Benchmark
    public long ringHandOff(DocaDpaBench.Ring r) throws InterruptedException {
        return DPA.ringHandOff(r);
    }
}
