package org.peerdirect.bench.dpa;

import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.dev.DocaDpaDevRdma;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The DPA side of {@link org.peerdirect.bench.DocaPingPongBench}: DOCA's {@code dpa_ping_pong}
 * kernel without its end. Each thread polls its completion context; per receive it re-posts the
 * receive and sends back (flushed, no report); the ping thread counts round trips in its argument
 * block with an atomic add, which the host's d2h reads may race (a plain store there, written back
 * only with the next doorbell, is a C1 the checker caught in the first version of this bench).
 */
@DpaApp("bench_doca_ping_pong")
public final class DocaPingPongDev {

    /** The argument block (8-byte words). */
    public static final int COMP = 0, RDMA = 8, RECV = 16, RECV_KEY = 24, SEND = 32, SEND_KEY = 40, IS_PING = 48, COUNT = 56, SIZE = 64;

    private DocaPingPongDev() {
    }

    @DpaGlobal
    static void pingPong(long a) {
        long comp = Dpa.ld64(a + COMP);
        long rdma = Dpa.ld64(a + RDMA);
        boolean ping = Dpa.ld64(a + IS_PING) != 0;
        while (true) {
            if (DocaDpaDevCompletion.getCompletion(comp) == 0) {
                continue;
            }
            DocaDpaDevRdma.postReceive(rdma, (int) Dpa.ld64(a + RECV_KEY), Dpa.ld64(a + RECV), 8);
            if (ping) { // an atomic: it reaches memory at once, so the host's reads (RDMA READs) may race it (a plain store would be C1)
                Dpa.amoAdd64(a + COUNT, 1);
            }
            DocaDpaDevRdma.postSend(rdma, 0, (int) Dpa.ld64(a + SEND_KEY), Dpa.ld64(a + SEND), 8,
                    DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
            DocaDpaDevCompletion.completionAck(comp, 1);
        }
    }

    /** Both first receives, then ping's first send: the exchange runs from here on. */
    @DpaRpc
    static long start(long pingArg, long pongArg) {
        DocaDpaDevRdma.postReceive(Dpa.ld64(pingArg + RDMA), (int) Dpa.ld64(pingArg + RECV_KEY), Dpa.ld64(pingArg + RECV), 8);
        DocaDpaDevRdma.postReceive(Dpa.ld64(pongArg + RDMA), (int) Dpa.ld64(pongArg + RECV_KEY), Dpa.ld64(pongArg + RECV), 8);
        DocaDpaDevRdma.postSend(Dpa.ld64(pingArg + RDMA), 0, (int) Dpa.ld64(pingArg + SEND_KEY), Dpa.ld64(pingArg + SEND), 8,
                DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
        return 0;
    }
}
