package org.peerdirect.dpa.samples.dev;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevRdma;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of {@code dpa:sample all_to_all}: DOCA's {@code dpa_all_to_all} application
 * ({@code applications/dpa_all_to_all}, DPA_MODEL.md §4 scenario 9), its {@code alltoall_kernel}
 * and the mutant that signals before it writes. Exported: itest runs it through the sample.
 */
@DpaApp("dpa_sample_all_to_all")
public final class AllToAllDev {

    private AllToAllDev() {
    }

    /**
     * A rank's argument block (8-byte words): its DOCA RDMA handle, its send and receive matrices
     * (R blocks of {@code A_BLOCK} bytes each, block i of the send matrix for rank i, block i of the
     * receive matrix from rank i), the send matrix's map handle, R, its rank, the sequence number
     * of this call, the mutant switch; then per rank i a {@code P_SIZE} record at {@code A_PEERS}.
     */
    public static final int A_RDMA = 0, A_SEND = 8, A_SEND_MMAP = 16, A_RECV = 24, A_BLOCK = 32, A_RANKS = 40, A_ME = 48, A_SEQ = 56,
            A_MUTANT = 64, A_PEERS = 72;
    /**
     * Per peer: the connection to it, its receive matrix (address, map handle as imported here),
     * the local sync event it signals (DPA handle) and its event this rank signals (remote net handle).
     */
    public static final int P_CONN = 0, P_RECV = 8, P_RECV_MMAP = 16, P_LOCAL_EVENT = 24, P_REMOTE_EVENT = 32, P_SIZE = 40;
    /** The mutant: {@code signal_set} posted before the write, whose post is not flushed (the signal's flush came first). */
    public static final int MUTANT_SIGNAL_BEFORE_WRITE = 1;

    /** The argument block's size for {@code ranks} ranks. */
    public static int allToAllSize(int ranks) {
        return A_PEERS + P_SIZE * ranks;
    }

    /**
     * {@code alltoall_kernel} of DOCA's {@code dpa_all_to_all}: thread t of the kernel's threads takes
     * the peers t, t + nthreads, ...; for each it writes this rank's block for the peer into the
     * peer's receive matrix at this rank's row (flushed, no report) and then sets the peer's sync
     * event for this rank to the sequence number on the same connection (the RC queue executes in
     * order: the peer that sees the value sees the block); then waits until each of its peers' events
     * here passed seq - 1. [model] One DOCA RDMA context per rank with a connection per peer (the
     * application has one context per peer); the rank's own block is copied on the DPA.
     */
    @DpaGlobal("alltoall_kernel")
    static void allToAll(long a) {
        int t = DocaDpaDev.threadRank();
        int nt = DocaDpaDev.numThreads();
        long rdma = Dpa.ld64(a + A_RDMA);
        long block = Dpa.ld64(a + A_BLOCK);
        long ranks = Dpa.ld64(a + A_RANKS);
        long me = Dpa.ld64(a + A_ME);
        long seq = Dpa.ld64(a + A_SEQ);
        boolean mutant = Dpa.ld64(a + A_MUTANT) == MUTANT_SIGNAL_BEFORE_WRITE;
        int srcMmap = (int) Dpa.ld64(a + A_SEND_MMAP);
        for (long i = t; i < ranks; i += nt) {
            long src = Dpa.ld64(a + A_SEND) + i * block;
            if (i == me) {
                long dst = Dpa.ld64(a + A_RECV) + me * block;
                for (long off = 0; off < block; off += 8) {
                    Dpa.st64(dst + off, Dpa.ld64(src + off));
                }
                Dpa.memoryWriteback(); // the block, for the host's d2h copy (a NIC read)
                continue;
            }
            long p = a + A_PEERS + P_SIZE * i;
            int conn = (int) Dpa.ld64(p + P_CONN);
            int dstMmap = (int) Dpa.ld64(p + P_RECV_MMAP);
            long dst = Dpa.ld64(p + P_RECV) + me * block;
            long event = Dpa.ld64(p + P_REMOTE_EVENT);
            if (mutant) {
                DocaDpaDevRdma.signalSet(rdma, conn, event, seq);
                DocaDpaDevRdma.postWrite(rdma, conn, dstMmap, dst, srcMmap, src, block, DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
            } else {
                DocaDpaDevRdma.postWrite(rdma, conn, dstMmap, dst, srcMmap, src, block,
                        DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS | DocaDpaDevRdma.SUBMIT_FLAG_FLUSH);
                DocaDpaDevRdma.signalSet(rdma, conn, event, seq);
            }
        }
        for (long i = t; i < ranks; i += nt) {
            if (i != me) {
                DocaDpaDevSyncEvent.waitGt(Dpa.ld64(a + A_PEERS + P_SIZE * i + P_LOCAL_EVENT), seq - 1, -1L);
            }
        }
    }
}
