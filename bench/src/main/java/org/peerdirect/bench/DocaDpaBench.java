package org.peerdirect.bench;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
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
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaNotificationCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;

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

    /** A host with one BlueField-3, a started DOCA DPA context of {@code bench_doca_dpa}, its events and workers. */
    @State(Scope.Benchmark)
    public static class Host {
        Path dir;
        Mm mm;
        StandalonePciBus bus;
        IbCore core;
        ConnectX4Device bf3;
        Mlx5CoreDev mlx5;
        Mlx5IbDev ib;
        AddressSpace proc;
        DocaDev dev;
        DocaDpa dpa;
        /** A launch's completion: DPA publisher (the launch), CPU subscriber. */
        DocaSyncEvent launched;
        long launches;
        /** The workers' event: CPU publisher, DPA subscriber (as DOCA's dpa_nvqual). */
        DocaSyncEvent activated;
        long activations;
        final List<DocaDpaThread> workers = new ArrayList<>();
        final List<DocaDpaNotificationCompletion> notes = new ArrayList<>();
        long storage;
        long handles;

        @Setup(Level.Trial)
        public void up() throws Exception {
            dir = Files.createTempDirectory("peerdirect-docadpabench");
            mm = new Mm(256L << 20, true, dir.resolve("swap"), 1 << 20);
            bus = new StandalonePciBus(new Iommu(mm));
            core = new IbCore(null);
            bf3 = new ConnectX4Device(ConnectX4Device.modelName(ConnectX4Device.DEVICE_BLUEFIELD3),
                    ConnectX4Device.DEVICE_BLUEFIELD3, new Fabric());
            mlx5 = new Mlx5CoreDev("mlx5_0", bus.register(bf3.spec()), mm, Mlx5CoreDev.Settings.DEFAULT);
            mlx5.load();
            ib = new Mlx5IbDev(mlx5, core.umems());
            IbvDevice d = core.register(ib);
            proc = mm.createProcess("doca-dpa-bench");
            proc.setMemlockLimit(128L << 20);
            IbvDeviceList list = new IbvDeviceList() {
                @Override
                public List<IbvDevice> devices() {
                    return List.of(d);
                }

                @Override
                public IbvDevice device(String name) {
                    return d;
                }
            };
            dev = DocaDev.open(DocaDevinfo.byIbdevName(DocaDevinfo.createList(proc, list, x -> null), "mlx5_0"));
            dpa = DocaDpa.create(dev);
            dpa.setApp(DocaBenchDevStubs.APP);
            dpa.start();
            launched = DocaSyncEvent.create();
            launched.addPublisherLocationDpa(dpa);
            launched.addSubscriberLocationCpu(dev);
            launched.start();
            activated = DocaSyncEvent.create();
            activated.addPublisherLocationCpu(dev);
            activated.addSubscriberLocationDpa(dpa);
            activated.start();
            startWorkers();
        }

        private void startWorkers() {
            storage = dpa.memAlloc(64L * WORKERS);
            dpa.memset(storage, 0, 64L * WORKERS);
            ByteBuffer hs = ByteBuffer.allocate(8 * WORKERS).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < WORKERS; i++) {
                DocaDpaThread t = DocaDpaThread.create(dpa);
                t.setFuncArg(DocaBenchDevStubs.WORKER, activated.getDpaHandle(dpa));
                t.setLocalStorage(storage + 64L * i);
                t.start();
                DocaDpaNotificationCompletion c = DocaDpaNotificationCompletion.create(dpa, t);
                c.start();
                hs.putLong(c.getDpaHandle());
                t.run();
                workers.add(t);
                notes.add(c);
            }
            handles = dpa.memAlloc(8L * WORKERS);
            dpa.h2dMemcpy(handles, hs.array());
        }

        @TearDown(Level.Trial)
        public void down() throws Exception {
            notes.forEach(c -> {
                c.stop();
                c.destroy();
            });
            workers.forEach(DocaDpaThread::destroy);
            dpa.memFree(handles);
            dpa.memFree(storage);
            activated.destroy();
            launched.destroy();
            dpa.stop();
            dpa.destroy();
            dev.close();
            core.unregister(ib);
            ib.close();
            mlx5.unload();
            proc.exit();
            mm.close();
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
