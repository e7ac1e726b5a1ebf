package org.peerdirect.dpa.samples;

import static org.peerdirect.dpa.samples.dev.AllToAllDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Function;

import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.rdma.DocaRdma;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.doca.syncevent.DocaSyncEventRemoteNet;
import org.peerdirect.dpa.samples.dev.AllToAllDevStubs;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * {@code dpa:sample all_to_all}: DOCA's {@code dpa_all_to_all} application (DPA_MODEL.md §4 scenario
 * 9) with its MPI ranks as objects of one JVM: {@link #RANKS} ranks, each a DPA context of its own,
 * over the devices with a DPA (rank r on device {@code r % devices}; with two BlueField-3s every
 * rank has peers on its own device and on the other). Each rank has a DOCA RDMA context with its
 * data path on its DPA and a connection to every other rank, a send and a receive matrix in its
 * DPA heap, and per peer a sync event the peer sets through RDMA (publisher remote net, subscriber
 * the rank's DPA). The host part the MPI processes do (exchanging connection details,
 * receive-matrix maps and event exports, launching each rank's kernel, waiting for it) goes through
 * {@link World}, the in-JVM rendezvous: an all-gather of each rank's exports. Each iteration the send
 * matrices hold new bytes; every rank's receive matrix must be exactly the transpose (block i of
 * rank r's receive matrix is block r of rank i's send matrix). dpa-samples' {@code AllToAllTest}
 * runs {@link World} on two BlueField-3s; itest's {@code DocaScenariosIT} runs the command.
 *
 * <p>[model] One DOCA RDMA context per rank with a connection per peer (the application has one
 * context per peer); no MPI, so no {@code MPI_Alltoall} reference run: the expected matrices are
 * computed.
 */
final class AllToAllSample {

    static final int RANKS = 4;
    static final int NTHREADS = 2;
    static final int BLOCK = 512;
    static final Duration BOUND = Duration.ofSeconds(120);
    static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_ATOMIC;

    private AllToAllSample() {
    }

    /**
     * The command: {@code iterations} all-to-alls on every device with a DPA (at least two: the
     * scenario is across devices), each checked; the mutant posts each signal before its write.
     *
     * @throws IllegalStateException fewer than two devices with a DPA; or a kernel that did not end
     */
    static void sample(AddressSpace proc, IbvDeviceList devices, Function<IbvDevice, String> pciAddrOf, int iterations, boolean mutant, Out out) {
        List<DocaDev> devs = new ArrayList<>();
        List<DocaDevinfo> list = DocaDevinfo.createList(proc, devices, pciAddrOf);
        try {
            for (DocaDevinfo i : list) {
                if (DocaDpa.capIsSupported(i)) {
                    devs.add(DocaDev.open(i));
                }
            }
        } finally {
            DocaDevinfo.destroyList(list);
        }
        try {
            if (devs.size() < 2) {
                throw new IllegalStateException(devs.size() + " device(s) with a DPA: all_to_all runs across two BlueField-3s "
                        + "(Configuration Admin: org.peerdirect.hca.cx4 bluefield3=2)");
            }
            out.line("%d ranks on %s, %d DPA threads each, blocks of %d bytes%s", RANKS, devs.stream().map(DocaDev::name).toList(), NTHREADS,
                    BLOCK, mutant ? "; the mutant: each signal posted before its write" : "");
            try (World w = new World(devs, RANKS)) {
                for (long seq = 1; seq <= iterations; seq++) {
                    w.allToAll(seq, mutant ? MUTANT_SIGNAL_BEFORE_WRITE : 0);
                    List<String> wrong = w.wrongBlocks(seq);
                    out.line("iteration %d: %s", seq, wrong.isEmpty() ? "every receive matrix is the transpose" : "wrong blocks (rank<-sender) " + wrong);
                }
            }
        } finally {
            devs.forEach(DocaDev::close);
        }
    }

    /** One rank's host objects; {@code undo} of its world destroys them. */
    static final class Rank {
        final int me;
        final DocaDev dev;
        final DocaDpa dpa;
        final DocaRdma rdma;
        final long send, recv, arg;
        final DocaMmap recvMap;
        final int sendMmap;
        /** The completion event of this rank's kernel launches (DPA → CPU). */
        final DocaSyncEvent done;
        /** {@code events[i]}: the event rank i sets here (null for this rank). */
        final DocaSyncEvent[] events;
        /** {@code exports[i]}: the export of this rank's connection for rank i. */
        final DocaRdma.Export[] exports;
        private final World world;

        Rank(World world, int me, DocaDev dev) {
            this.world = world;
            this.me = me;
            this.dev = dev;
            int ranks = world.nranks;
            events = new DocaSyncEvent[ranks];
            exports = new DocaRdma.Export[ranks];
            dpa = DocaDpa.create(dev);
            world.dpas.add(dpa);
            dpa.setApp(AllToAllDevStubs.APP);
            dpa.start();
            rdma = DocaRdma.create(dev);
            world.undo.add(rdma::destroy);
            rdma.setPermissions(RW);
            rdma.setDatapathOnDpa(dpa);
            rdma.setMaxNumConnections(ranks - 1);
            rdma.setSendQueueSize(8);
            rdma.setRecvQueueSize(2);
            rdma.start();
            send = alloc((long) ranks * BLOCK);
            recv = alloc((long) ranks * BLOCK);
            arg = alloc(allToAllSize(ranks));
            sendMmap = map(send, (long) ranks * BLOCK).devGetDpaHandle(dev);
            recvMap = map(recv, (long) ranks * BLOCK);
            done = DocaSyncEvent.create();
            world.undo.add(done::destroy);
            done.addPublisherLocationDpa(dpa);
            done.addSubscriberLocationCpu(dev);
            done.start();
            for (int i = 0; i < ranks; i++) {
                if (i != me) {
                    DocaSyncEvent e = DocaSyncEvent.create();
                    world.undo.add(e::destroy);
                    e.addPublisherLocationRemoteNet();
                    e.addSubscriberLocationDpa(dpa);
                    e.start();
                    events[i] = e;
                    exports[i] = rdma.export();
                }
            }
        }

        private long alloc(long n) {
            long d = dpa.memAlloc(n);
            world.undo.add(() -> dpa.memFree(d));
            dpa.memset(d, 0, n);
            return d;
        }

        private DocaMmap map(long daddr, long len) {
            DocaMmap m = DocaMmap.create();
            world.undo.add(m::destroy);
            m.setDpaMemrange(dpa, daddr, len);
            m.setPermissions(RW);
            m.addDev(dev);
            m.start();
            return m;
        }

        /** This rank's connection index for peer {@code i}: the order of its exports. */
        int conn(int i) {
            return i < me ? i : i - 1;
        }
    }

    /**
     * The in-JVM rendezvous in place of MPI: what each rank publishes for the others (an
     * all-gather), then each rank takes what its peers published for it. Rank {@code r} publishes,
     * per peer i, its connection details for i, its receive matrix's RDMA export and the export of
     * the event i sets. {@link #close} destroys everything, newest first, then the contexts.
     */
    static final class World implements AutoCloseable {
        final int nranks;
        final List<Rank> ranks = new ArrayList<>();
        final List<DocaDpa> dpas = new ArrayList<>();
        final List<Runnable> undo = new ArrayList<>();

        World(List<DocaDev> devs, int nranks) {
            this.nranks = nranks;
            try {
                build(devs);
            } catch (RuntimeException e) {
                close();
                throw e;
            }
        }

        private void build(List<DocaDev> devs) {
            for (int r = 0; r < nranks; r++) {
                ranks.add(new Rank(this, r, devs.get(r % devs.size())));
            }
            for (Rank a : ranks) {
                for (Rank b : ranks) {
                    if (a != b) {
                        a.rdma.connect(b.exports[a.me].connectionDetails(), a.exports[b.me].connection());
                    }
                }
            }
            for (Rank a : ranks) {
                ByteBuffer w = ByteBuffer.allocate(allToAllSize(nranks)).order(ByteOrder.LITTLE_ENDIAN);
                w.putLong(A_RDMA, a.rdma.getDpaHandle()).putLong(A_SEND, a.send).putLong(A_SEND_MMAP, a.sendMmap).putLong(A_RECV, a.recv)
                        .putLong(A_BLOCK, BLOCK).putLong(A_RANKS, nranks).putLong(A_ME, a.me);
                for (Rank b : ranks) {
                    if (a == b) {
                        continue;
                    }
                    DocaMmap peerRecv = DocaMmap.createFromExport(0, b.recvMap.exportRdma(b.dev), a.dev);
                    undo.add(peerRecv::destroy);
                    DocaSyncEventRemoteNet peerEvent = DocaSyncEventRemoteNet.createFromExport(a.dev, b.events[a.me].exportToRemoteNet());
                    undo.add(peerEvent::destroy);
                    int p = A_PEERS + P_SIZE * b.me;
                    w.putLong(p + P_CONN, a.conn(b.me)).putLong(p + P_RECV, b.recv).putLong(p + P_RECV_MMAP, peerRecv.devGetDpaHandle(a.dev))
                            .putLong(p + P_LOCAL_EVENT, a.events[b.me].getDpaHandle(a.dpa)).putLong(p + P_REMOTE_EVENT, peerEvent.getDpaHandle(a.dpa));
                }
                a.dpa.h2dMemcpy(a.arg, w.array());
            }
        }

        /** One all-to-all: new send matrices, every rank's kernel launched, every rank's completion awaited (bounded). */
        void allToAll(long seq, int mutant) {
            for (Rank a : ranks) {
                a.dpa.h2dMemcpy(a.send, sendMatrix(nranks, seq, a.me));
                a.dpa.h2dMemcpy(a.arg + A_SEQ, le(seq, mutant));
            }
            for (Rank a : ranks) {
                a.dpa.kernelLaunchUpdateSet(null, 0, a.done, seq, NTHREADS, AllToAllDevStubs.ALLTOALL_KERNEL, a.arg);
            }
            for (Rank a : ranks) {
                try {
                    a.done.waitGt(seq - 1, -1L, BOUND);
                } catch (DocaException e) {
                    throw new IllegalStateException("iteration " + seq + ": rank " + a.me + "'s kernel did not end: " + e.getMessage() + "\n" + state(), e);
                }
            }
        }

        /** The blocks of rank r's receive matrix that are not sender i's block for r, as "r<-i". */
        List<String> wrongBlocks(long seq) {
            List<String> wrong = new ArrayList<>();
            for (Rank a : ranks) {
                byte[] got = a.dpa.d2hMemcpy(a.recv, nranks * BLOCK);
                for (int i = 0; i < nranks; i++) {
                    byte[] want = Arrays.copyOfRange(sendMatrix(nranks, seq, i), a.me * BLOCK, (a.me + 1) * BLOCK);
                    if (!Arrays.equals(want, Arrays.copyOfRange(got, i * BLOCK, (i + 1) * BLOCK))) {
                        wrong.add(a.me + "<-" + i);
                    }
                }
            }
            return wrong;
        }

        /** Each rank's completion event (host memory; no DMA: the DPA may be stuck). */
        String state() {
            StringBuilder b = new StringBuilder();
            for (Rank a : ranks) {
                b.append("rank ").append(a.me).append(": done ").append(a.done.get()).append('\n');
            }
            return b.toString();
        }

        @Override
        public void close() {
            for (int i = undo.size() - 1; i >= 0; i--) {
                undo.get(i).run();
            }
            undo.clear();
            for (DocaDpa dpa : dpas) {
                try {
                    dpa.stop();
                } catch (DocaException e) {
                    // not started (a failure while building): destroy alone
                }
                dpa.destroy();
            }
            dpas.clear();
        }
    }

    /** Rank r's send matrix of iteration {@code seq}: block i (for rank i) differs per (seq, r, i, byte). */
    static byte[] sendMatrix(int ranks, long seq, int r) {
        byte[] m = new byte[ranks * BLOCK];
        for (int i = 0; i < ranks; i++) {
            for (int j = 0; j < BLOCK; j++) {
                m[i * BLOCK + j] = (byte) (seq * 31 + r * 67 + i * 13 + j * 3 + (j >> 7));
            }
        }
        return m;
    }

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }
}
