package org.peerdirect.bench;

import static org.peerdirect.bench.dpa.DocaPingPongDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
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
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.bench.dpa.DocaPingPongDevStubs;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;

/**
 * Issue 43's DPA ping-pong figure (DPA_MODEL.md §4 scenario 7, DOCA's {@code dpa_ping_pong}): the
 * round trip of an 8-byte SEND between two DPA threads on one BlueField-3, each with its DOCA RDMA
 * context (data path on the DPA) and its completion context, polled, never rescheduling. The
 * exchange runs free once started; an invocation waits for {@link #ROUNDS} more round trips
 * (the ping thread's count, read by the host's d2h copies), so the score is one round trip. Its
 * reference is {@link PingPongBench}'s host RC round trip ({@code rc}) in the same JMH command.
 *
 * <pre>./peerdirect bench -f 1 'DocaPingPongBench|PingPongBench.rc'</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class DocaPingPongBench {

    static final int ROUNDS = 100;
    static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE;

    /** A host with one BlueField-3, a DOCA DPA context and the two sides of the exchange. */
    @State(Scope.Benchmark)
    public static class Host {
        Path dir;
        Mm mm;
        StandalonePciBus bus;
        IbCore core;
        ConnectX4Device bf3;
        PciFunction fn;
        Mlx5CoreDev mlx5;
        Mlx5IbDev ib;
        IbvDevice ibdev;
        AddressSpace proc;
        DocaDev dev;
        DocaDpa dpa;
        long pingArg;
        final List<Runnable> undo = new ArrayList<>();
        /** The DPA's polls of unchanged memory wait for a write (the model's default) or spin (the A/B of what waiting saves). */
        @Param({"true", "false"})
        boolean elidePolls;

        @Setup(Level.Trial)
        public void up() throws Exception {
            dir = Files.createTempDirectory("peerdirect-docapingpong");
            mm = new Mm(256L << 20, true, dir.resolve("swap"), 1 << 20);
            bus = new StandalonePciBus(new Iommu(mm));
            core = new IbCore(null);
            bf3 = new ConnectX4Device(ConnectX4Device.modelName(ConnectX4Device.DEVICE_BLUEFIELD3), ConnectX4Device.DEVICE_BLUEFIELD3, new Fabric());
            fn = bus.register(bf3.spec());
            mlx5 = new Mlx5CoreDev("mlx5_0", fn, mm, Mlx5CoreDev.Settings.DEFAULT);
            mlx5.load();
            bf3.dpaElidePolls(elidePolls);
            ib = new Mlx5IbDev(mlx5, core.umems());
            ibdev = core.register(ib);
            proc = mm.createProcess("doca-ping-pong-bench");
            proc.setMemlockLimit(128L << 20);
            IbvDeviceList list = new IbvDeviceList() {
                @Override
                public List<IbvDevice> devices() {
                    return List.of(ibdev);
                }

                @Override
                public IbvDevice device(String name) {
                    if (!name.equals(ibdev.name())) {
                        throw new KernelException(KernelException.Errno.ENODEV, "no device " + name);
                    }
                    return ibdev;
                }
            };
            dev = DocaDev.open(DocaDevinfo.byIbdevName(DocaDevinfo.createList(proc, list, d -> fn.bdf()), "mlx5_0"));
            dpa = DocaDpa.create(dev);
            dpa.setApp(DocaPingPongDevStubs.APP);
            dpa.start();
            long[] args = {side(true), side(false)};
            pingArg = args[0];
            DocaRdma ping = rdmas.get(0);
            DocaRdma pong = rdmas.get(1);
            DocaRdma.Export a = ping.export();
            DocaRdma.Export b = pong.export();
            ping.connect(b.connectionDetails(), a.connection());
            pong.connect(a.connectionDetails(), b.connection());
            threads.forEach(DocaDpaThread::run);
            dpa.rpc(DocaPingPongDevStubs.START, args[0], args[1]);
        }

        final List<DocaRdma> rdmas = new ArrayList<>();
        final List<DocaDpaThread> threads = new ArrayList<>();

        private long side(boolean ping) {
            long arg = dpa.memAlloc(SIZE);
            long recv = dpa.memAlloc(64);
            long send = dpa.memAlloc(64);
            dpa.memset(send, 0, 64);
            DocaDpaThread t = DocaDpaThread.create(dpa);
            undo.add(t::destroy);
            t.setFuncArg(DocaPingPongDevStubs.PING_PONG, arg);
            t.start();
            DocaDpaCompletion c = DocaDpaCompletion.create(dpa, 16);
            undo.add(c::destroy);
            c.setThread(t);
            c.start();
            DocaRdma r = DocaRdma.create(dev);
            r.setPermissions(RW);
            r.setDatapathOnDpa(dpa);
            r.setRecvQueueSize(4);
            r.setSendQueueSize(8);
            r.dpaCompletionAttach(c);
            r.start();
            undo.add(r::destroy);
            ByteBuffer b = ByteBuffer.allocate(SIZE).order(ByteOrder.LITTLE_ENDIAN);
            b.putLong(COMP, c.getDpaHandle()).putLong(RDMA, r.getDpaHandle()).putLong(RECV, recv).putLong(RECV_KEY, key(recv))
                    .putLong(SEND, send).putLong(SEND_KEY, key(send)).putLong(IS_PING, ping ? 1 : 0).putLong(COUNT, 0);
            dpa.h2dMemcpy(arg, b.array());
            rdmas.add(r);
            threads.add(t);
            return arg;
        }

        private long key(long daddr) {
            DocaMmap m = DocaMmap.create();
            m.setDpaMemrange(dpa, daddr, 64);
            m.setPermissions(RW);
            m.addDev(dev);
            m.start();
            undo.add(m::destroy);
            return m.devGetDpaHandle(dev) & 0xffffffffL;
        }

        long count() {
            return ByteBuffer.wrap(dpa.d2hMemcpy(pingArg + COUNT, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
        }

        @TearDown(Level.Trial)
        public void down() throws Exception {
            for (int i = undo.size() - 1; i >= 0; i--) {
                undo.get(i).run();
            }
            dpa.stop();
            dpa.destroy();
            dev.close();
            core.unregister(ib);
            ib.close();
            mlx5.unload();
            proc.exit();
            core.close();
            bf3.close();
            bus.close();
            mm.close();
        }
    }

    /** {@link #ROUNDS} round trips of the free-running exchange; JMH divides by them. */
    @Benchmark
    @OperationsPerInvocation(ROUNDS)
    public long dpaRoundTrip(Host h) {
        long target = h.count() + ROUNDS;
        long deadline = System.nanoTime() + 60_000_000_000L;
        long c;
        while ((c = h.count()) < target) {
            if (System.nanoTime() > deadline) { // the DPA process ended (a checker finding) or the exchange stalled: say so, never hang
                throw new IllegalStateException("no round trip for 60 s at " + c + " of " + target + "; DPA: " + h.bf3.dpaDescribe());
            }
            // a look every 200 µs: each look is a d2h copy, an RDMA READ the host thread drives through the NIC
            // model itself; looking continuously kept a core busy the DPA's threads and the NIC needed (JFR:
            // 70 % of the samples in the looking thread). 100 round trips take milliseconds: the last look's
            // lateness is under 1 % of an invocation.
            java.util.concurrent.locks.LockSupport.parkNanos(200_000);
        }
        return c;
    }
}
