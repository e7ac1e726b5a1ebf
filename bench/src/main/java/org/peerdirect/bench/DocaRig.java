package org.peerdirect.bench;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongSupplier;

import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.flexio.FlexioApp;
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
 * The machine the DOCA DPA benchmarks ({@link DocaPingPongBench}, {@link DocaVerbsPingPongBench},
 * {@link DocaDpaBench}) run on: memory without poisoning, an IOMMU, one BlueField-3 model with mlx5 on top, one process
 * with the BlueField-3 opened as a {@link DocaDev} and a started {@link DocaDpa} running the bench's
 * app. What a bench makes on it goes into {@link #undo}; {@link #close} destroys that newest first,
 * then the context, the device and the machine. {@link #awaitRounds} is both ping-pong benchmarks' invocation:
 * wait for a free-running exchange's round-trip count to pass a target, bounded.
 */
final class DocaRig implements AutoCloseable {

    /** Local read/write and remote write: the ping-pong buffers' maps. */
    static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE;

    final Path dir;
    final Mm mm;
    final StandalonePciBus bus;
    final IbCore core;
    final ConnectX4Device bf3;
    final PciFunction fn;
    final Mlx5CoreDev mlx5;
    final Mlx5IbDev ib;
    final IbvDevice ibdev;
    final AddressSpace proc;
    final DocaDev dev;
    final DocaDpa dpa;
    /** What the bench made on the rig, destroyed newest first by {@link #close}. */
    final List<Runnable> undo = new ArrayList<>();

    /**
     * Process {@code process} on a fresh BlueField-3 whose DPA polls of unchanged memory wait for a
     * write ({@code elidePolls}, the model's default) or spin; a DPA context with {@code app} started.
     */
    DocaRig(String process, FlexioApp app, boolean elidePolls) throws Exception {
        dir = Files.createTempDirectory("peerdirect-" + process);
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
        proc = mm.createProcess(process);
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
        dpa.setApp(app);
        dpa.start();
    }

    /** {@code n} bytes of the DPA heap, zeroed; freed by {@link #close}. */
    long alloc(long n) {
        long d = dpa.memAlloc(n);
        dpa.memset(d, 0, n);
        undo.add(() -> dpa.memFree(d));
        return d;
    }

    /** A started map of 64 bytes of DPA memory at {@code daddr} ({@link #RW}); its DPA handle, unsigned. */
    long key(long daddr) {
        DocaMmap m = DocaMmap.create();
        m.setDpaMemrange(dpa, daddr, 64);
        m.setPermissions(RW);
        m.addDev(dev);
        m.start();
        undo.add(m::destroy);
        return m.devGetDpaHandle(dev) & 0xffffffffL;
    }

    /** The word of DPA memory at {@code daddr}, by a d2h copy (an RDMA READ the calling thread drives through the NIC model). */
    long word(long daddr) {
        return ByteBuffer.wrap(dpa.d2hMemcpy(daddr, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    /**
     * One invocation of a free-running exchange: waits until {@code count} has grown by {@code rounds}
     * and returns it. Fails naming the DPA's state when it has not within 60 s (the DPA process ended
     * on a checker finding, or the exchange stalled): never a hang.
     */
    long awaitRounds(LongSupplier count, int rounds) {
        long target = count.getAsLong() + rounds;
        long deadline = System.nanoTime() + 60_000_000_000L;
        long c;
        while ((c = count.getAsLong()) < target) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no round trip for 60 s at " + c + " of " + target + "; DPA: " + bf3.dpaDescribe());
            }
            // a look every 200 µs: each look is a d2h copy, an RDMA READ the host thread drives through the NIC
            // model itself; looking continuously kept a core busy the DPA's threads and the NIC needed (JFR:
            // 70 % of the samples in the looking thread). 100 round trips take milliseconds: the last look's
            // lateness is under 1 % of an invocation.
            java.util.concurrent.locks.LockSupport.parkNanos(200_000);
        }
        return c;
    }

    /**
     * A free-running exchange's end, before {@link #close}: raises each stop word and waits (bounded,
     * 10 s, then IllegalStateException naming the DPA's state) until each "finished" word is
     * non-zero, so no DPA thread posts on a queue the teardown destroys (which would end the DPA
     * process with an outbox isolation error).
     */
    void stopThreads(long[] stopWords, long[] doneWords) {
        for (long w : stopWords) {
            dpa.memset(w, 1, 8);
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        for (long w : doneWords) {
            while (word(w) == 0) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("a DPA thread did not finish on its stop word within 10 s; DPA: " + bf3.dpaDescribe());
                }
                java.util.concurrent.locks.LockSupport.parkNanos(200_000); // each look is an RDMA READ
            }
        }
    }

    @Override
    public void close() {
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
