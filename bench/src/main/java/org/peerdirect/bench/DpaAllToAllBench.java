package org.peerdirect.bench;

import static org.peerdirect.bench.dpa.AllToAllDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.peerdirect.bench.dpa.AllToAllDevStubs;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.doca.syncevent.DocaSyncEventRemoteNet;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.standalone.IbCore;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.ib.Mlx5IbDev;
import org.peerdirect.rdma.RcConnect;

/**
 * Issue 43's all-to-all figure (DPA_MODEL.md §4 scenario 9, DOCA's {@code dpa_all_to_all}):
 * {@value #RANKS} ranks over two BlueField-3s on one fabric (rank r on {@code mlx5_<r % 2>}), each
 * rank's block {@value #BLOCK} bytes, so one all-to-all moves 4 × 3 blocks of 64 KiB across
 * connections (and each rank copies its own block locally).
 * <ul>
 * <li>{@code dpaAllToAll}: doca-rdma's {@code DpaAllToAllTest} flow, one DPA context and one DOCA
 * RDMA context (data path on the DPA) per rank, a connection per peer; per all-to-all the host
 * writes each rank's sequence number, launches each rank's kernel ({@value #NTHREADS} threads:
 * {@code post_write} then {@code signal_set} per peer, then waits for its peers' events) and waits
 * for each rank's completion event. Kernel launch cost is inside the score, as in the
 * application.</li>
 * <li>{@code hostAllToAll}, the reference: the host does the same writes through libmlx5 on the same
 * two devices, one RC QP per ordered pair of ranks, buffers in host memory: per peer an RDMA WRITE of
 * the block, then an 8-byte WRITE of the sequence number into the peer's flag (signaled); each rank's
 * own block copied by the CPU; then every completion polled and every flag seen.</li>
 * </ul>
 * Setup checks one all-to-all of each kind: every receive matrix is exactly the transpose. Wall
 * time per all-to-all. The block size is 64 KiB (issue 43's figure); {@code -Da2a.block=N} (a
 * multiple of 8) shows how the two scale with it. Session 24, loaded machine, one brief run each:
 * DPA 44 ms / 158 ms / 0.8–1.8 s at 512 B / 8 KiB / 64 KiB, host 24 µs / 30 µs / 0.6 ms. At 64 KiB
 * the DPA's score is mostly each rank's copy of its own block on the DPA (8192 {@code ld64}/{@code st64}
 * pairs, each an ISA call under the memory model): with that loop removed, the same run took 32 ms.
 * So the ratio measures the DPA's per-access cost first, then launches (a one-rank launch is ms,
 * {@link DocaDpaBench}), then the RDMA.
 *
 * <pre>./peerdirect bench -f 1 DpaAllToAllBench
 * ./peerdirect bench -f 1 -jvmArgsAppend -Da2a.block=512 DpaAllToAllBench</pre>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED"})
public class DpaAllToAllBench {

    static final int RANKS = 4;
    static final int DEVICES = 2;
    static final int NTHREADS = 2;
    /** Bytes per block: 64 KiB unless {@code -Da2a.block} says otherwise (a positive multiple of 8: the DPA copies its own block in 8-byte words). */
    static final int BLOCK = block(Integer.getInteger("a2a.block", 64 << 10));

    private static int block(int b) {
        if (b <= 0 || b % 8 != 0 || b > 256 << 10) {
            throw new IllegalArgumentException("a2a.block must be a positive multiple of 8 up to 256 KiB (the DPA heap holds 2 x 4 blocks), not " + b);
        }
        return b;
    }
    static final long BOUND_NANOS = 60_000_000_000L;
    static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_ATOMIC;

    /** Two BlueField-3s with mlx5, one process; the DPA ranks and the host ranks over the same devices. */
    @State(Scope.Benchmark)
    public static class World {
        Path dir;
        Mm mm;
        StandalonePciBus bus;
        IbCore core;
        final List<ConnectX4Device> bf3 = new ArrayList<>();
        final List<PciFunction> fns = new ArrayList<>();
        final List<Mlx5CoreDev> mlx5 = new ArrayList<>();
        final List<Mlx5IbDev> ibs = new ArrayList<>();
        final List<IbvDevice> ibdevs = new ArrayList<>();
        AddressSpace proc;
        final List<DocaDev> devs = new ArrayList<>();
        final List<DpaRank> dpaRanks = new ArrayList<>();
        /** Every DPA context started, in order (stopped by {@link #down}). */
        final List<DocaDpa> dpas = new ArrayList<>();
        final List<HostRank> hostRanks = new ArrayList<>();
        /** What {@link #down} undoes, newest first, before the DPA contexts stop. */
        final List<Runnable> undo = new ArrayList<>();
        long dpaSeq;
        long hostSeq;

        @Setup(Level.Trial)
        public void up() throws Exception {
            dir = Files.createTempDirectory("peerdirect-alltoall");
            mm = new Mm(256L << 20, true, dir.resolve("swap"), 1 << 20);
            bus = new StandalonePciBus(new Iommu(mm));
            core = new IbCore(null);
            Fabric fabric = new Fabric();
            for (int d = 0; d < DEVICES; d++) {
                ConnectX4Device m = new ConnectX4Device(ConnectX4Device.modelName(ConnectX4Device.DEVICE_BLUEFIELD3),
                        ConnectX4Device.DEVICE_BLUEFIELD3, fabric);
                PciFunction fn = bus.register(m.spec());
                Mlx5CoreDev c = new Mlx5CoreDev("mlx5_" + d, fn, mm, Mlx5CoreDev.Settings.DEFAULT);
                c.load();
                Mlx5IbDev ib = new Mlx5IbDev(c, core.umems());
                bf3.add(m);
                fns.add(fn);
                mlx5.add(c);
                ibs.add(ib);
                ibdevs.add(core.register(ib));
            }
            proc = mm.createProcess("all-to-all-bench");
            proc.setMemlockLimit(128L << 20);
            List<DocaDevinfo> infos = DocaDevinfo.createList(proc, deviceList(), d -> fns.get(ibdevs.indexOf(d)).bdf());
            for (int d = 0; d < DEVICES; d++) {
                devs.add(DocaDev.open(DocaDevinfo.byIbdevName(infos, "mlx5_" + d)));
            }
            for (int r = 0; r < RANKS; r++) {
                dpaRanks.add(new DpaRank(this, r));
            }
            DpaRank.connect(this);
            for (int r = 0; r < RANKS; r++) {
                hostRanks.add(new HostRank(this, r));
            }
            HostRank.connect(hostRanks);
            dpaAllToAll(++dpaSeq);
            checkTranspose("dpa", r -> dpaRanks.get(r).dpa.d2hMemcpy(dpaRanks.get(r).recv, RANKS * BLOCK));
            hostAllToAll(++hostSeq);
            checkTranspose("host", r -> {
                byte[] b = new byte[RANKS * BLOCK];
                proc.read(hostRanks.get(r).recv(), b, 0, b.length);
                return b;
            });
        }

        private IbvDeviceList deviceList() {
            return new IbvDeviceList() {
                @Override
                public List<IbvDevice> devices() {
                    return ibdevs;
                }

                @Override
                public IbvDevice device(String name) {
                    return ibdevs.stream().filter(d -> d.name().equals(name)).findFirst()
                            .orElseThrow(() -> new KernelException(KernelException.Errno.ENODEV, "no device " + name));
                }
            };
        }

        /** One all-to-all on the DPAs: each rank's sequence number, its kernel launched, then every completion awaited. */
        long dpaAllToAll(long seq) {
            byte[] s = le(seq);
            for (DpaRank a : dpaRanks) {
                a.dpa.h2dMemcpy(a.arg + A_SEQ, s);
            }
            for (DpaRank a : dpaRanks) {
                a.dpa.kernelLaunchUpdateSet(null, 0, a.done, seq, NTHREADS, AllToAllDevStubs.ALL_TO_ALL, a.arg);
            }
            for (DpaRank a : dpaRanks) {
                a.done.waitGt(seq - 1, -1L, java.time.Duration.ofNanos(BOUND_NANOS));
            }
            return seq;
        }

        /** The same writes by the host: per rank and peer a block WRITE and a flag WRITE (signaled), own block by the CPU, then every completion and flag. */
        long hostAllToAll(long seq) {
            for (HostRank a : hostRanks) {
                a.post(seq);
            }
            for (HostRank a : hostRanks) {
                a.reap();
            }
            for (HostRank a : hostRanks) {
                a.awaitFlags(seq);
            }
            return seq;
        }

        /** Every rank's receive matrix (as {@code recv} reads it) is the transpose of the send matrices. */
        void checkTranspose(String what, java.util.function.IntFunction<byte[]> recv) {
            for (int r = 0; r < RANKS; r++) {
                byte[] got = recv.apply(r);
                for (int i = 0; i < RANKS; i++) {
                    byte[] want = Arrays.copyOfRange(sendMatrix(i), r * BLOCK, (r + 1) * BLOCK);
                    if (!Arrays.equals(want, Arrays.copyOfRange(got, i * BLOCK, (i + 1) * BLOCK))) {
                        throw new IllegalStateException(what + " all-to-all: rank " + r + "'s block from rank " + i + " is not rank " + i
                                + "'s block for it");
                    }
                }
            }
        }

        @TearDown(Level.Trial)
        public void down() throws Exception {
            for (HostRank h : hostRanks) {
                h.close();
            }
            for (int i = undo.size() - 1; i >= 0; i--) {
                undo.get(i).run();
            }
            for (DocaDpa d : dpas) {
                d.stop();
                d.destroy();
            }
            devs.forEach(DocaDev::close);
            for (int d = 0; d < DEVICES; d++) {
                core.unregister(ibs.get(d));
                ibs.get(d).close();
                mlx5.get(d).unload();
            }
            proc.exit();
            core.close();
            bf3.forEach(ConnectX4Device::close);
            bus.close();
            mm.close();
        }
    }

    /** Rank r's send matrix: block i (for rank i) differs per (r, i, byte). */
    static byte[] sendMatrix(int r) {
        byte[] m = new byte[RANKS * BLOCK];
        for (int i = 0; i < RANKS; i++) {
            for (int j = 0; j < BLOCK; j++) {
                m[i * BLOCK + j] = (byte) (r * 67 + i * 13 + j * 3 + (j >> 7));
            }
        }
        return m;
    }

    static byte[] le(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array();
    }

    /** One DPA rank: its context, DOCA RDMA with a connection per peer, matrices and argument block in its heap, events. */
    static final class DpaRank {
        final int me;
        final DocaDev dev;
        final DocaDpa dpa;
        final DocaRdma rdma;
        final long send, recv, arg;
        final DocaMmap recvMap;
        final int sendMmap;
        /** The completion event of the rank's launches (DPA → CPU). */
        final DocaSyncEvent done;
        /** {@code events[i]}: the event rank i sets here through RDMA (null for this rank). */
        final DocaSyncEvent[] events = new DocaSyncEvent[RANKS];
        /** {@code exports[i]}: this rank's connection for rank i. */
        final DocaRdma.Export[] exports = new DocaRdma.Export[RANKS];
        private final List<Runnable> undo;

        DpaRank(World w, int me) {
            this.me = me;
            this.undo = w.undo;
            dev = w.devs.get(me % DEVICES);
            dpa = DocaDpa.create(dev);
            dpa.setApp(AllToAllDevStubs.APP);
            dpa.start();
            w.dpas.add(dpa); // stopped by down() even if the rest of this constructor fails
            rdma = DocaRdma.create(dev);
            rdma.setPermissions(RW);
            rdma.setDatapathOnDpa(dpa);
            rdma.setMaxNumConnections(RANKS - 1);
            rdma.setSendQueueSize(8);
            rdma.setRecvQueueSize(2);
            rdma.start();
            undo.add(rdma::destroy);
            send = alloc((long) RANKS * BLOCK);
            recv = alloc((long) RANKS * BLOCK);
            arg = alloc(size(RANKS));
            dpa.h2dMemcpy(send, sendMatrix(me));
            sendMmap = map(send, (long) RANKS * BLOCK).devGetDpaHandle(dev);
            recvMap = map(recv, (long) RANKS * BLOCK);
            done = DocaSyncEvent.create();
            done.addPublisherLocationDpa(dpa);
            done.addSubscriberLocationCpu(dev);
            done.start();
            undo.add(done::destroy);
            for (int i = 0; i < RANKS; i++) {
                if (i != me) {
                    DocaSyncEvent e = DocaSyncEvent.create();
                    e.addPublisherLocationRemoteNet();
                    e.addSubscriberLocationDpa(dpa);
                    e.start();
                    undo.add(e::destroy);
                    events[i] = e;
                    exports[i] = rdma.export();
                }
            }
        }

        private long alloc(long n) {
            long d = dpa.memAlloc(n);
            dpa.memset(d, 0, n);
            undo.add(() -> dpa.memFree(d));
            return d;
        }

        private DocaMmap map(long daddr, long len) {
            DocaMmap m = DocaMmap.create();
            m.setDpaMemrange(dpa, daddr, len);
            m.setPermissions(RW);
            m.addDev(dev);
            m.start();
            undo.add(m::destroy);
            return m;
        }

        int conn(int i) {
            return i < me ? i : i - 1;
        }

        /** The in-JVM rendezvous in place of MPI (as the test's {@code World}): connections, then each rank's argument block. */
        static void connect(World w) {
            List<DpaRank> ranks = w.dpaRanks;
            for (DpaRank a : ranks) {
                for (DpaRank b : ranks) {
                    if (a != b) {
                        a.rdma.connect(b.exports[a.me].connectionDetails(), a.exports[b.me].connection());
                    }
                }
            }
            for (DpaRank a : ranks) {
                ByteBuffer buf = ByteBuffer.allocate(size(RANKS)).order(ByteOrder.LITTLE_ENDIAN);
                buf.putLong(A_RDMA, a.rdma.getDpaHandle()).putLong(A_SEND, a.send).putLong(A_SEND_MMAP, a.sendMmap).putLong(A_RECV, a.recv)
                        .putLong(A_BLOCK, BLOCK).putLong(A_RANKS, RANKS).putLong(A_ME, a.me);
                for (DpaRank b : ranks) {
                    if (a == b) {
                        continue;
                    }
                    DocaMmap peerRecv = DocaMmap.createFromExport(0, b.recvMap.exportRdma(b.dev), a.dev);
                    w.undo.add(peerRecv::destroy);
                    DocaSyncEventRemoteNet peerEvent = DocaSyncEventRemoteNet.createFromExport(a.dev, b.events[a.me].exportToRemoteNet());
                    w.undo.add(peerEvent::destroy);
                    int p = A_PEERS + P_SIZE * b.me;
                    buf.putLong(p + P_CONN, a.conn(b.me)).putLong(p + P_RECV, b.recv).putLong(p + P_RECV_MMAP, peerRecv.devGetDpaHandle(a.dev))
                            .putLong(p + P_LOCAL_EVENT, a.events[b.me].getDpaHandle(a.dpa))
                            .putLong(p + P_REMOTE_EVENT, peerEvent.getDpaHandle(a.dpa));
                }
                a.dpa.h2dMemcpy(a.arg, buf.array());
            }
        }
    }

    /**
     * One host rank: a buffer in the process ({@code [send matrix | receive matrix | RANKS flags |
     * the sequence word]}) registered on its device's context, one CQ, one RC QP per peer.
     */
    static final class HostRank {
        static final int IB_RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE;
        final int me;
        final AddressSpace proc;
        final IbvContext ctx;
        final IbvPd pd;
        final long buf;
        final long len;
        final IbvMr mr;
        final IbvCq cq;
        final IbvQp[] qps = new IbvQp[RANKS];
        final IbvSendWr wr = new IbvSendWr();
        final IbvWc[] wc = {new IbvWc()};
        final byte[] own = new byte[BLOCK];
        final byte[] word = new byte[8];
        HostRank[] peers;

        HostRank(World w, int me) {
            this.me = me;
            proc = w.proc;
            ctx = w.devs.get(me % DEVICES).ibvContext();
            pd = ctx.allocPd();
            len = 2L * RANKS * BLOCK + 8L * RANKS + 8;
            buf = proc.mmap(len);
            proc.populate(buf, len, true);
            proc.write(buf, sendMatrix(me), 0, RANKS * BLOCK);
            mr = pd.regMr(buf, len, IB_RW);
            cq = ctx.createCq(4 * RANKS, null);
            for (int i = 0; i < RANKS; i++) {
                if (i != me) {
                    IbvQpInitAttr x = new IbvQpInitAttr();
                    x.sendCq = cq;
                    x.recvCq = cq;
                    x.qpType = IbvQpType.RC;
                    x.maxSendWr = 8;
                    x.maxRecvWr = 1;
                    x.maxSendSge = 1;
                    x.maxRecvSge = 1;
                    qps[i] = pd.createQp(x);
                }
            }
        }

        long recv() {
            return buf + (long) RANKS * BLOCK;
        }

        long flag(int from) {
            return buf + 2L * RANKS * BLOCK + 8L * from;
        }

        long seqWord() {
            return buf + 2L * RANKS * BLOCK + 8L * RANKS;
        }

        /** Each ordered pair's QPs connected to each other (RESET → INIT → RTR → RTS) by GID: a BlueField-3's port is Ethernet (RoCE v2). */
        static void connect(List<HostRank> ranks) {
            HostRank[] all = ranks.toArray(HostRank[]::new);
            for (HostRank a : all) {
                a.peers = all;
                for (HostRank b : all) {
                    if (a != b) {
                        byte[] gid = org.peerdirect.ib.core.verbs.IbvGid.parse(b.ctx.queryGid(1, 0));
                        new RcConnect().access(IB_RW).minRnrTimer(1).timeout(12, 7).gid(gid).connect(a.qps[b.me], 0, b.qps[a.me].qpNum());
                    }
                }
            }
        }

        /** Per peer: the block WRITE (unsignaled), then the flag WRITE (signaled: RC order puts it after the block); own block by the CPU. */
        void post(long seq) {
            proc.write(seqWord(), le(seq), 0, 8);
            for (HostRank b : peers) {
                if (b == this) {
                    proc.read(buf + (long) me * BLOCK, own, 0, BLOCK);
                    proc.write(recv() + (long) me * BLOCK, own, 0, BLOCK);
                    continue;
                }
                IbvSendWr w = wr;
                w.opcode = IbvWrOpcode.RDMA_WRITE;
                w.wrId = b.me;
                w.sge(buf + (long) b.me * BLOCK, BLOCK, mr.lkey());
                w.remoteAddr = b.recv() + (long) me * BLOCK;
                w.rkey = b.mr.rkey();
                w.sendFlags = 0;
                qps[b.me].postSend(w);
                w.sge(seqWord(), 8, mr.lkey());
                w.remoteAddr = b.flag(me);
                w.sendFlags = IbvSendWr.SEND_SIGNALED;
                qps[b.me].postSend(w);
            }
        }

        /** The signaled completion of each peer's flag WRITE. */
        void reap() {
            for (int i = 0; i < RANKS - 1; i++) {
                RdmaRig.pollOne(cq, wc);
            }
        }

        /** Every peer's flag here holds {@code seq} (host memory the peers' WRITEs reach). */
        void awaitFlags(long seq) {
            long deadline = System.nanoTime() + BOUND_NANOS;
            for (int i = 0; i < RANKS; i++) {
                if (i == me) {
                    continue;
                }
                while (true) {
                    proc.read(flag(i), word, 0, 8);
                    if (ByteBuffer.wrap(word).order(ByteOrder.LITTLE_ENDIAN).getLong() == seq) {
                        break;
                    }
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("host rank " + me + ": no flag " + seq + " from rank " + i + " in 60 s");
                    }
                    Thread.onSpinWait();
                }
            }
        }

        void close() {
            for (IbvQp q : qps) {
                if (q != null) {
                    q.destroy();
                }
            }
            cq.destroy();
            mr.dereg();
            pd.dealloc();
            proc.munmap(buf, len);
        }
    }

    /** One all-to-all of the DPA ranks (kernel launches included). */
    @Benchmark
    public long dpaAllToAll(World w) {
        return w.dpaAllToAll(++w.dpaSeq);
    }

    /** The same writes posted by the host through libmlx5. */
    @Benchmark
    public long hostAllToAll(World w) {
        return w.hostAllToAll(++w.hostSeq);
    }
}
