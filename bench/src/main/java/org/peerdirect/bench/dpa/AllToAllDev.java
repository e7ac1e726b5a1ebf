package org.peerdirect.bench.dpa;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevRdma;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The DPA side of {@link org.peerdirect.bench.DpaAllToAllBench}: {@code alltoall_kernel} of DOCA's
 * {@code dpa_all_to_all} as doca-rdma's {@code DpaAllToAllTest} runs it (its {@code RdmaProgs.allToAll},
 * without the mutant; test classes are not on the bench's path). A rank's argument block is the
 * test's layout: 8-byte words at the {@code A_*} offsets, then per rank a {@code P_SIZE} record.
 */
@DpaApp("bench_all_to_all")
public final class AllToAllDev {

    /** Rank block: DOCA RDMA handle, send matrix, its map handle, receive matrix, block bytes, ranks, this rank, the sequence number. */
    public static final int A_RDMA = 0, A_SEND = 8, A_SEND_MMAP = 16, A_RECV = 24, A_BLOCK = 32, A_RANKS = 40, A_ME = 48, A_SEQ = 56,
            A_PEERS = 64;
    /** Per peer: the connection to it, its receive matrix (address, map handle as imported here), the local and the remote event. */
    public static final int P_CONN = 0, P_RECV = 8, P_RECV_MMAP = 16, P_LOCAL_EVENT = 24, P_REMOTE_EVENT = 32, P_SIZE = 40;

    private AllToAllDev() {
    }

    /** The argument block's size for {@code ranks} ranks. */
    public static int size(int ranks) {
        return A_PEERS + P_SIZE * ranks;
    }

    /**
     * Thread t of the kernel's threads takes the peers t, t + nthreads, ...: for each, this rank's
     * block written into the peer's receive matrix at this rank's row (flushed, no report), then
     * the peer's event for this rank set to the sequence number on the same connection (RC order:
     * the peer that sees the value sees the block); the rank's own block copied on the DPA; then it
     * waits until each of its peers' events here passed seq - 1.
     */
    @DpaGlobal
    static void allToAll(long a) {
        int t = DocaDpaDev.threadRank();
        int nt = DocaDpaDev.numThreads();
        long rdma = Dpa.ld64(a + A_RDMA);
        long block = Dpa.ld64(a + A_BLOCK);
        long ranks = Dpa.ld64(a + A_RANKS);
        long me = Dpa.ld64(a + A_ME);
        long seq = Dpa.ld64(a + A_SEQ);
        int srcMmap = (int) Dpa.ld64(a + A_SEND_MMAP);
        for (long i = t; i < ranks; i += nt) {
            long src = Dpa.ld64(a + A_SEND) + i * block;
            if (i == me) {
                long dst = Dpa.ld64(a + A_RECV) + me * block;
                for (long off = 0; off < block; off += 8) {
                    Dpa.st64(dst + off, Dpa.ld64(src + off));
                }
                Dpa.memoryWriteback(); // the block, for the host's d2h check
                continue;
            }
            long p = a + A_PEERS + P_SIZE * i;
            DocaDpaDevRdma.postWrite(rdma, (int) Dpa.ld64(p + P_CONN), (int) Dpa.ld64(p + P_RECV_MMAP), Dpa.ld64(p + P_RECV) + me * block,
                    srcMmap, src, block, DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS | DocaDpaDevRdma.SUBMIT_FLAG_FLUSH);
            DocaDpaDevRdma.signalSet(rdma, (int) Dpa.ld64(p + P_CONN), Dpa.ld64(p + P_REMOTE_EVENT), seq);
        }
        for (long i = t; i < ranks; i += nt) {
            if (i != me) {
                DocaDpaDevSyncEvent.waitGt(Dpa.ld64(a + A_PEERS + P_SIZE * i + P_LOCAL_EVENT), seq - 1, -1L);
            }
        }
    }
}
