package org.peerdirect.doca.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.doca.rdma.progs.RdmaProgs.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DpaLab;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.rdma.progs.RdmaProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.doca.syncevent.DocaSyncEventRemoteNet;

/**
 * DPA_MODEL.md §4 scenario 9, DOCA's {@code dpa_all_to_all} application with its MPI ranks as
 * objects of one JVM: {@value #RANKS} ranks, each a DPA context of its own, over two BlueField-3s
 * (rank r on {@code mlx5_<r % 2>}: every rank has peers on its own device and on the other). Each
 * rank has a DOCA RDMA context with its data path on its DPA and a connection to every other
 * rank, a send and a receive matrix in its DPA heap, and per peer a sync event the peer sets
 * through RDMA (publisher remote net, subscriber the rank's DPA). The host part the MPI
 * processes do (exchanging connection details, receive-matrix maps and event exports, launching
 * each rank's kernel, waiting for it) goes through {@link World}, the in-JVM rendezvous: an
 * all-gather of each rank's exports. Each iteration the send matrices hold new bytes; every rank's
 * receive matrix must be exactly the transpose (block i of rank r's receive matrix is block r of
 * rank i's send matrix).
 */
class DpaAllToAllTest {

    static final int RANKS = 4;
    static final int DEVICES = 2;
    static final int NTHREADS = 2;
    static final int BLOCK = 512;
    static final int ITERATIONS = 5;
    private static final Duration BOUND = Duration.ofSeconds(120);
    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_ATOMIC;

    @TempDir
    Path tmp;
    private DpaLab lab;
    private final List<DocaDev> devs = new ArrayList<>();
    private final List<DocaDpa> dpas = new ArrayList<>();
    /** What {@link #down} destroys, newest first (before the DPA contexts and devices). */
    private final List<Runnable> undo = new ArrayList<>();

    @BeforeEach
    void up() {
        lab = new DpaLab(tmp, DEVICES);
        for (int d = 0; d < DEVICES; d++) {
            devs.add(lab.open(d));
        }
    }

    @AfterEach
    void down() {
        for (int i = undo.size() - 1; i >= 0; i--) {
            undo.get(i).run();
        }
        for (DocaDpa dpa : dpas) {
            dpa.stop();
            dpa.destroy();
        }
        for (int d = 0; d < DEVICES; d++) {
            int dev = d;
            assertEquals(List.of(), lab.dpa(d).stream().filter(l -> !l.startsWith("eu")).toList(), "mlx5_" + dev + ": no DPA process left");
        }
        devs.forEach(DocaDev::close);
        lab.close();
    }

    /** One rank's host objects. */
    private final class Rank {
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
        final DocaSyncEvent[] events = new DocaSyncEvent[RANKS];
        /** {@code exports[i]}: the export of this rank's connection for rank i. */
        final DocaRdma.Export[] exports = new DocaRdma.Export[RANKS];

        Rank(int me) {
            this.me = me;
            dev = devs.get(me % DEVICES);
            dpa = DocaDpa.create(dev);
            dpa.setApp(RdmaProgsStubs.APP);
            dpa.start();
            dpas.add(dpa);
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
            arg = alloc(allToAllSize(RANKS));
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

        /** This rank's connection index for peer {@code i}: the order of its exports. */
        int conn(int i) {
            return i < me ? i : i - 1;
        }
    }

    /**
     * The in-JVM rendezvous in place of MPI: what each rank publishes for the others (an
     * all-gather), then each rank takes what its peers published for it. Rank {@code r} publishes,
     * per peer i, its connection details for i, its receive matrix's RDMA export and the export of
     * the event i sets.
     */
    private final class World {
        final List<Rank> ranks = new ArrayList<>();

        World() {
            for (int r = 0; r < RANKS; r++) {
                ranks.add(new Rank(r));
            }
            for (Rank a : ranks) {
                for (Rank b : ranks) {
                    if (a != b) {
                        a.rdma.connect(b.exports[a.me].connectionDetails(), a.exports[b.me].connection());
                    }
                }
            }
            for (Rank a : ranks) {
                ByteBuffer w = ByteBuffer.allocate(allToAllSize(RANKS)).order(ByteOrder.LITTLE_ENDIAN);
                w.putLong(A_RDMA, a.rdma.getDpaHandle()).putLong(A_SEND, a.send).putLong(A_SEND_MMAP, a.sendMmap).putLong(A_RECV, a.recv)
                        .putLong(A_BLOCK, BLOCK).putLong(A_RANKS, RANKS).putLong(A_ME, a.me);
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

        /** One all-to-all: new send matrices, every rank's kernel launched, every rank's completion awaited. */
        void allToAll(long seq, int mutant) {
            for (Rank a : ranks) {
                a.dpa.h2dMemcpy(a.send, sendMatrix(seq, a.me));
                a.dpa.h2dMemcpy(a.arg + A_SEQ, le(seq, mutant));
            }
            for (Rank a : ranks) {
                a.dpa.kernelLaunchUpdateSet(null, 0, a.done, seq, NTHREADS, RdmaProgsStubs.ALL_TO_ALL, a.arg);
            }
            for (Rank a : ranks) {
                try {
                    a.done.waitGt(seq - 1, -1L, BOUND);
                } catch (org.peerdirect.doca.DocaException e) {
                    throw new AssertionError("iteration " + seq + ": rank " + a.me + "'s kernel did not end: " + e.getMessage() + "\n" + state(), e);
                }
            }
        }

        /** The blocks of rank r's receive matrix that are not block {@code from}'s expected bytes, as "r<-i". */
        List<String> wrongBlocks(long seq) {
            List<String> wrong = new ArrayList<>();
            for (Rank a : ranks) {
                byte[] got = a.dpa.d2hMemcpy(a.recv, RANKS * BLOCK);
                for (int i = 0; i < RANKS; i++) {
                    byte[] want = java.util.Arrays.copyOfRange(sendMatrix(seq, i), a.me * BLOCK, (a.me + 1) * BLOCK);
                    if (!java.util.Arrays.equals(want, java.util.Arrays.copyOfRange(got, i * BLOCK, (i + 1) * BLOCK))) {
                        wrong.add(a.me + "<-" + i);
                    }
                }
            }
            return wrong;
        }

        /** Each rank's completion event (host memory), then the DPA objects of both devices; no DMA (the DPA may be stuck). */
        String state() {
            StringBuilder b = new StringBuilder();
            for (Rank a : ranks) {
                b.append("rank ").append(a.me).append(": done ").append(a.done.get()).append('\n');
            }
            return b.append(ps()).toString();
        }

        String ps() {
            List<String> all = new ArrayList<>();
            for (int d = 0; d < DEVICES; d++) {
                all.addAll(lab.dpa(d));
            }
            return String.join("\n", all);
        }
    }

    /** Rank r's send matrix of iteration {@code seq}: block i (for rank i) differs per (seq, r, i, byte). */
    static byte[] sendMatrix(long seq, int r) {
        byte[] m = new byte[RANKS * BLOCK];
        for (int i = 0; i < RANKS; i++) {
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

    @Test
    void theReceiveMatricesAreTheTransposeEveryIteration() {
        World w = new World();
        assertEquals(2, DEVICES);
        for (long seq = 1; seq <= ITERATIONS; seq++) {
            w.allToAll(seq, 0);
            assertEquals(List.of(), w.wrongBlocks(seq), "iteration " + seq + ": every receive block is its sender's block for this rank");
            for (Rank a : w.ranks) {
                assertEquals(seq, a.done.get(), "rank " + a.me + ": the kernel's completion event set to the sequence number");
                for (int i = 0; i < RANKS; i++) {
                    if (i != a.me) {
                        assertEquals(seq, a.events[i].get(), "rank " + a.me + ": rank " + i + " signalled " + seq + " through RDMA");
                    }
                }
            }
        }
        String ps = w.ps();
        assertTrue(!ps.contains("C1") && !ps.contains("C2") && !ps.contains("C3") && !ps.contains("C7"), "no memory-model finding: " + ps);
    }

    /**
     * The mutant: each write posted after the signal that was meant to follow it, and not
     * flushed (the signal's doorbell came before it). The peers' events still reach the sequence
     * number, so every kernel ends; but no block crossed a connection: only the diagonal (each
     * rank's own block, copied on the DPA) is right.
     */
    @Test
    void aSignalBeforeItsWriteIsCaughtAsWrongData() {
        World w = new World();
        w.allToAll(1, MUTANT_SIGNAL_BEFORE_WRITE);
        List<String> wrong = w.wrongBlocks(1);
        assertNotEquals(List.of(), wrong, "the mutant's receive matrices are not the transpose");
        List<String> offDiagonal = new ArrayList<>();
        for (int r = 0; r < RANKS; r++) {
            for (int i = 0; i < RANKS; i++) {
                if (r != i) {
                    offDiagonal.add(r + "<-" + i);
                }
            }
        }
        assertEquals(offDiagonal, wrong, "every block that had to cross a connection is wrong, the diagonal is right");
    }
}
