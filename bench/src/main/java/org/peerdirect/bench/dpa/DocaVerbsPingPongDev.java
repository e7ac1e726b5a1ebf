package org.peerdirect.bench.dpa;

import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.*;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The DPA side of {@link org.peerdirect.bench.DocaVerbsPingPongBench}: the free-running exchange of
 * dpa-samples' {@code PingPongDev} (DOCA's {@code dpa_ping_pong}, as {@code DocaPingPongBench} runs it)
 * on DOCA verbs QPs ({@code doca_dpa_dev_verbs_*}) instead of DOCA RDMA connections. Each
 * thread polls its completion context; per receive it posts and commits the next receive, then
 * posts and commits an unsignaled SEND back; the ping thread counts round trips with an atomic add
 * (the host's d2h reads race it). The WR and SGE structures live in the argument block.
 */
@DpaApp("bench_doca_verbs_ping_pong")
public final class DocaVerbsPingPongDev {

    /**
     * The argument block (8-byte words), then two sets of SGEs and WRs (at {@link #THREAD} for the
     * thread, at {@link #RPC} for the start RPC): a set is written and read by one DPA thread only
     * (the RPC's handler is another thread; sharing one set across them without a fence is the C2
     * the checker caught in this bench's first version). {@link #STOP}: the host's stop word; a thread
     * that sees it raises {@link #DONE} (an atomic) and finishes, so the teardown destroys the QPs
     * only once no thread can post on them.
     */
    public static final int COMP = 0, QP = 8, RECV = 16, RECV_KEY = 24, SEND = 32, SEND_KEY = 40, IS_PING = 48, COUNT = 56, THREAD = 64,
            RPC = 160, STOP = 256, DONE = 264, SIZE = 272;
    /** Offsets in a set. */
    static final int RSGE = 0, SSGE = 16, SWR = 32, RWR = 80;

    private DocaVerbsPingPongDev() {
    }

    /** The SGEs and both WRs of the set at {@code a + set}, once: the loop only posts them. */
    private static void prepare(long a, int set) {
        long w = a + set;
        long rs = w + RSGE;
        Dpa.st64(rs + SGE_ADDR, Dpa.ld64(a + RECV));
        Dpa.st32(rs + SGE_LKEY, (int) Dpa.ld64(a + RECV_KEY));
        Dpa.st32(rs + SGE_LENGTH, 8);
        long ss = w + SSGE;
        Dpa.st64(ss + SGE_ADDR, Dpa.ld64(a + SEND));
        Dpa.st32(ss + SGE_LKEY, (int) Dpa.ld64(a + SEND_KEY));
        Dpa.st32(ss + SGE_LENGTH, 8);
        recvWrSetSgList(w + RWR, rs);
        recvWrSetSgNumSge(w + RWR, 1);
        sendWrSetSgList(w + SWR, ss);
        sendWrSetSgNumSge(w + SWR, 1);
        sendWrSetOpcode(w + SWR, SEND_WR_OPCODE_SEND);
        sendWrSetSendFlags(w + SWR, SEND_WR_FLAGS_NONE);
        sendWrSetFenceMode(w + SWR, SEND_WR_FM_NO_FENCE);
    }

    private static void recv(long a, int set) {
        long qp = Dpa.ld64(a + QP);
        qpPostRecvWr(qp, a + set + RWR);
        qpCommitRecv(qp);
    }

    private static void send(long a, int set) {
        long qp = Dpa.ld64(a + QP);
        qpPostSendWr(qp, a + set + SWR);
        qpCommitSend(qp);
    }

    @DpaGlobal
    static void pingPong(long a) {
        long comp = Dpa.ld64(a + COMP);
        boolean ping = Dpa.ld64(a + IS_PING) != 0;
        prepare(a, THREAD);
        while (true) {
            if (Dpa.ld64(a + STOP) != 0) {
                Dpa.amoAdd64(a + DONE, 1);
                DocaDpaDev.threadFinish();
            }
            if (DocaDpaDevCompletion.getCompletion(comp) == 0) {
                continue;
            }
            recv(a, THREAD);
            if (ping) {
                Dpa.amoAdd64(a + COUNT, 1);
            }
            send(a, THREAD);
            DocaDpaDevCompletion.completionAck(comp, 1);
        }
    }

    /** Both sides' structures and first receives, then ping's first send: the exchange runs from here on. */
    @DpaRpc
    static long start(long pingArg, long pongArg) {
        prepare(pingArg, RPC);
        prepare(pongArg, RPC);
        recv(pingArg, RPC);
        recv(pongArg, RPC);
        send(pingArg, RPC);
        return 0;
    }
}
