package org.peerdirect.bench;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
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
import org.peerdirect.bench.dpa.DocaBenchDevStubs;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaNotificationCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.syncevent.DocaSyncEvent;

/**
 * Issue 43's DOCA DPA figures on a BlueField-3 (mlx5_core, mlx5_ib, DOCA DPA on FlexIO in a user
 * process), each beside its reference in the same run:
 * <ul>
 * <li>{@code launchOneRank}: {@code doca_dpa_kernel_launch_update_add} of a one-rank empty kernel
 *     until the host sees its completion event (an upper bound of launch → first rank running: the
 *     rank's own run is empty); reference {@code ringHandOff}: a token handed from this thread to a
 *     second one through a one-slot ring and back (what the launch must do at least: wake the
 *     dispatcher thread and be woken back).</li>
 * <li>{@code activations}: one RPC notifies {@value #WORKERS} persistent DPA threads, each does
 *     {@code DocaBenchDev.WORK} ISA operations, adds 1 to a sync event and reschedules; the host waits
 *     for all; the score is per activation ({@code 1e9 / score} activations per second). Against
 *     the number of carriers: run the command once per count with
 *     {@code -jvmArgsAppend -XX:ActiveProcessorCount=N} (the virtual threads' carriers and the DPA
 *     scheduler's permits both follow it), {@code ringHandOff} in each run as the reference.</li>
 * </ul>
 * Wall time; the DPA's virtual cycles are {@code dpa:eus}'. No hardware figure is invented.
 *
 * <pre>./peerdirect bench -f 1 DocaDpaBench
 * for n in 1 2 4 8; do ./peerdirect bench -f 1 -jvmArgsAppend -XX:ActiveProcessorCount=$n 'DocaDpaBench.(activations|ringHandOff)'; done</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class DocaDpaBench {

    /** Persistent DPA threads one {@code activations} operation notifies. */
    static final int WORKERS = 16;
    private static final Duration BOUND = Duration.ofSeconds(60);

    /** The rig ({@link DocaRig}) with a started DOCA DPA context of {@code bench_doca_dpa}, its events and workers. */
    @State(Scope.Benchmark)
    public static class Host {
        DocaRig rig;
        DocaDpa dpa;
        /** A launch's completion: DPA publisher (the launch), CPU subscriber. */
        DocaSyncEvent launched;
        long launches;
        /** The workers' event: CPU publisher, DPA subscriber (as DOCA's dpa_nvqual). */
        DocaSyncEvent activated;
        long activations;
        final List<DocaDpaThread> workers = new ArrayList<>();
        long handles;

        @Setup(Level.Trial)
        public void up() throws Exception {
            rig = new DocaRig("doca-dpa-bench", DocaBenchDevStubs.APP, true);
            dpa = rig.dpa;
            launched = DocaSyncEvent.create();
            launched.addPublisherLocationDpa(dpa);
            launched.addSubscriberLocationCpu(rig.dev);
            launched.start();
            rig.undo.add(launched::destroy);
            activated = DocaSyncEvent.create();
            activated.addPublisherLocationCpu(rig.dev);
            activated.addSubscriberLocationDpa(dpa);
            activated.start();
            rig.undo.add(activated::destroy);
            startWorkers();
        }

        /** The workers, each with 64 bytes of local storage and a notification completion; their handles in DPA memory. */
        private void startWorkers() {
            long storage = rig.alloc(64L * WORKERS);
            ByteBuffer hs = ByteBuffer.allocate(8 * WORKERS).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < WORKERS; i++) {
                DocaDpaThread t = DocaDpaThread.create(dpa);
                rig.undo.add(t::destroy);
                t.setFuncArg(DocaBenchDevStubs.WORKER, activated.getDpaHandle(dpa));
                t.setLocalStorage(storage + 64L * i);
                t.start();
                DocaDpaNotificationCompletion c = DocaDpaNotificationCompletion.create(dpa, t);
                c.start();
                rig.undo.add(() -> {
                    c.stop();
                    c.destroy();
                });
                hs.putLong(c.getDpaHandle());
                t.run();
                workers.add(t);
            }
            handles = rig.alloc(8L * WORKERS);
            dpa.h2dMemcpy(handles, hs.array());
        }

        @TearDown(Level.Trial)
        public void down() {
            rig.close();
        }
    }

    /** The reference: a partner thread that hands every token of ring {@code a} back through ring {@code b}. */
    @State(Scope.Benchmark)
    public static class Ring {
        final ArrayBlockingQueue<Long> a = new ArrayBlockingQueue<>(1);
        final ArrayBlockingQueue<Long> b = new ArrayBlockingQueue<>(1);
        Thread partner;
        long token;

        @Setup(Level.Trial)
        public void up() {
            partner = Thread.ofPlatform().daemon().name("ring-partner").start(() -> {
                try {
                    while (true) {
                        long t = a.take();
                        if (t < 0) {
                            return;
                        }
                        b.put(t);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }

        @TearDown(Level.Trial)
        public void down() throws InterruptedException {
            a.put(-1L);
            partner.join();
        }
    }

    @Benchmark
    public long launchOneRank(Host h) {
        h.dpa.kernelLaunchUpdateAdd(null, 0, h.launched, 1, 1, DocaBenchDevStubs.EMPTY, 0L);
        h.launched.waitGt(h.launches++, -1L, BOUND);
        return h.launches;
    }

    @Benchmark
    public long ringHandOff(Ring r) throws InterruptedException {
        r.a.put(r.token++);
        return r.b.take();
    }

    @Benchmark
    @OperationsPerInvocation(WORKERS)
    public long activations(Host h) {
        h.dpa.rpc(DocaBenchDevStubs.NOTIFY_ALL, h.handles, WORKERS);
        h.activations += WORKERS;
        h.activated.waitGt(h.activations - 1, -1L, BOUND);
        return h.activations;
    }
}
