package org.peerdirect.dpa.samples.dev;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.dev.DocaDpaDevRdma;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of DOCA's {@code dpa_ping_pong} sample ({@code samples/doca_dpa/dpa_ping_pong/device/
 * dpa_ping_pong_kernels_dev.c}, doca-samples 3.3; DPA_MODEL.md §4 scenario 7): {@code thread_kernel}
 * run by a ping and a pong thread, each polling its completion context, and
 * {@code trigger_first_iteration_rpc}. The device program of dpa-samples' {@code DpaPingPongTest}
 * and itest's {@code DocaDpaScenariosIT} (scenario 7 in Felix). [model] Where the C sample keeps
 * its state in globals and its thread's argument struct, the argument block ({@code PP_*}) and
 * the thread's local storage ({@code TLS_*}) hold it (dpacc has no device globals), every field a
 * word; {@code TLS_NO_REPOST} (0 in the sample) is the mutant's switch, {@code TLS_ROUNDS} (0 in
 * the sample) the bench's: the exchange of the bench's {@code DocaPingPongBench} is this kernel run
 * free. The RPC's log line is left out (an RPC has no DOCA thread block, so it would print nothing).
 */
@DpaApp("dpa_sample_ping_pong")
public final class PingPongDev {

    private PingPongDev() {
    }

    /** A ping-pong thread's argument block (8-byte words). */
    public static final int PP_COMP = 0, PP_RDMA = 8, PP_RECV = 16, PP_RECV_MMAP = 24, PP_RECV_LEN = 32, PP_SEND = 40, PP_SEND_MMAP = 48,
            PP_SEND_LEN = 56, PP_EVENT = 64, PP_EVENT_VAL = 72, PP_SIZE = 80;
    /**
     * A ping-pong thread's local storage: its received-values array (u32 each), receives so far,
     * whether it is the ping thread, the mutant's switch, and where a free-running exchange counts
     * its round trips (0: the sample's exchange, which ends after {@link #ITERATIONS}). Run free
     * (the bench), the threads never end nor log, and ping adds 1 to that word per round trip with
     * an atomic: it reaches memory at once, so the host's d2h reads (RDMA READs) may race it (a
     * plain store there, written back only with the next doorbell, is a C1).
     */
    public static final int TLS_VALUES = 0, TLS_NUM = 8, TLS_IS_PING = 16, TLS_NO_REPOST = 24, TLS_ROUNDS = 32, TLS_SIZE = 40;
    /**
     * A free-running exchange's words from its {@code TLS_ROUNDS} address: the round trips (ping's
     * atomic), the host's stop word, and each side's "finished" (an atomic, ping then pong): a
     * thread that sees the stop word raises its own and finishes, so the host tears the RDMA
     * contexts down only once no thread can post on them.
     */
    public static final int RUN_ROUNDS = 0, RUN_STOP = 8, RUN_PING_DONE = 16, RUN_PONG_DONE = 24, RUN_SIZE = 32;
    /** Iterations ({@code EXPECTED_NUM_RECEIVES}). */
    public static final int ITERATIONS = 100;

    /**
     * {@code thread_kernel} of {@code dpa_ping_pong}: polls its completion context without
     * rescheduling; per receive marks the value received, re-posts the receive, sends its next
     * value (flushed, no report of its own); after the 100th sets its sync event and finishes.
     * With {@code TLS_ROUNDS} set it runs free instead: ping counts each round trip there, no
     * thread logs, and each ends only once the host raised the run's stop word ({@code RUN_*}).
     */
    @DpaGlobal("thread_kernel")
    static void threadKernel(long a) {
        long tls = DocaDpaDev.threadGetLocalStorage();
        long values = Dpa.ld64(tls + TLS_VALUES);
        boolean ping = Dpa.ld64(tls + TLS_IS_PING) != 0;
        long comp = Dpa.ld64(a + PP_COMP);
        long rdma = Dpa.ld64(a + PP_RDMA);
        long send = Dpa.ld64(a + PP_SEND);
        long rounds = Dpa.ld64(tls + TLS_ROUNDS);
        while (true) {
            if (rounds != 0 && Dpa.ld64(rounds + RUN_STOP) != 0) {
                Dpa.amoAdd64(rounds + (ping ? RUN_PING_DONE : RUN_PONG_DONE), 1);
                DocaDpaDev.threadFinish();
            }
            if (DocaDpaDevCompletion.getCompletion(comp) == 0) {
                continue;
            }
            long num = Dpa.ld64(tls + TLS_NUM) + 1;
            Dpa.st64(tls + TLS_NUM, num);
            long v = Dpa.ld64(Dpa.ld64(a + PP_RECV));
            if (v >= 0 && v < ITERATIONS) {
                Dpa.st32(values + 4 * v, 1);
            }
            if (Dpa.ld64(tls + TLS_NO_REPOST) == 0) { // the mutant does not re-post its receive
                DocaDpaDevRdma.postReceive(rdma, (int) Dpa.ld64(a + PP_RECV_MMAP), Dpa.ld64(a + PP_RECV), Dpa.ld64(a + PP_RECV_LEN));
            }
            if (ping) { // the RPC sent the first value: the next one before this send
                if (rounds != 0) {
                    Dpa.amoAdd64(rounds, 1);
                }
                Dpa.st64(send, Dpa.ld64(send) + 1);
            }
            DocaDpaDevRdma.postSend(rdma, 0, (int) Dpa.ld64(a + PP_SEND_MMAP), send, Dpa.ld64(a + PP_SEND_LEN),
                    DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
            if (rounds == 0) {
                DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_INFO, (ping ? "Ping --> Pong" : "Pong --> Ping") + " Iteration #" + num);
            }
            if (num == ITERATIONS && rounds == 0) {
                for (int i = 0; i < ITERATIONS; i++) {
                    if (Dpa.ld32(values + 4L * i) != 1) {
                        DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_ERROR, (ping ? "Ping" : "Pong") + " DPA Thread didn't receive data with value " + i);
                        DocaDpaDev.threadFinish();
                    }
                }
                Dpa.memoryWriteback(); // the array, for the host's d2h copy (a NIC read)
                DocaDpaDevSyncEvent.updateSet(Dpa.ld64(a + PP_EVENT), Dpa.ld64(a + PP_EVENT_VAL));
                DocaDpaDev.threadFinish();
            }
            if (!ping) { // this send was the value received first: the next one after it
                Dpa.st64(send, Dpa.ld64(send) + 1);
            }
            DocaDpaDevCompletion.completionAck(comp, 1);
        }
    }

    /** {@code trigger_first_iteration_rpc}: both first receives, and ping's first send (value 0). */
    @DpaRpc("trigger_first_iteration_rpc")
    static long triggerFirstIterationRpc(long pingArg, long pongArg) {
        DocaDpaDevRdma.postReceive(Dpa.ld64(pingArg + PP_RDMA), (int) Dpa.ld64(pingArg + PP_RECV_MMAP), Dpa.ld64(pingArg + PP_RECV),
                Dpa.ld64(pingArg + PP_RECV_LEN));
        DocaDpaDevRdma.postReceive(Dpa.ld64(pongArg + PP_RDMA), (int) Dpa.ld64(pongArg + PP_RECV_MMAP), Dpa.ld64(pongArg + PP_RECV),
                Dpa.ld64(pongArg + PP_RECV_LEN));
        DocaDpaDevRdma.postSend(Dpa.ld64(pingArg + PP_RDMA), 0, (int) Dpa.ld64(pingArg + PP_SEND_MMAP), Dpa.ld64(pingArg + PP_SEND),
                Dpa.ld64(pingArg + PP_SEND_LEN), DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
        return 0;
    }
}
