package org.peerdirect.dpa.samples.dev;

import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of {@code dpa:sample echo} and {@code dpa:sample fence}: FlexIO's packet processor
 * restated on RC (DPA_MODEL.md §4 scenario 2). The handler drains its receive CQ, echoes each
 * message upper-cased with a SEND from its own QP (rings, doorbell records and buffers in the
 * process heap), re-posts the receive, drains its send CQ (a NON_DPA_CQ it polls), arms the
 * receive CQ with its consumer index and reschedules. {@link #echoNoWriteback} is the fence
 * sample's mistake: no {@code __dpa_thread_memory_writeback} between the WQE and the doorbell, so
 * the NIC would fetch a WQE still in the EU's write buffer (the checker's C1).
 *
 * <p>Context at the thread argument (8-byte words at the offsets below): outbox, rq cqn, rq cq ring,
 * rq cq dbr, sq cq ring, sq cq dbr, qpn, wq, qp dbr, mkey, rx buffers, tx buffers, then the
 * handler's state: rq ci, sq pi, sq cq ci, echoes.
 */
@DpaApp("dpa_sample_echo")
public final class EchoDev {

    public static final int OUTBOX = 0, RQ_CQN = 8, RQ_CQ = 16, RQ_CQ_DBR = 24, SQ_CQ = 32, SQ_CQ_DBR = 40, QPN = 48, WQ = 56,
            QP_DBR = 64, MKEY = 72, RX = 80, TX = 88, RQ_CI = 96, SQ_PI = 104, SQ_CQ_CI = 112, ECHOES = 120, SIZE = 128;
    public static final int LOG_CQ = 6;
    public static final int LOG_RQ = 4;
    public static final int LOG_RQ_STRIDE = 2;
    public static final int LOG_SQ = 4;
    /** Bytes of one message buffer; a longer message is cut to it. */
    public static final int BUF = 64;

    private EchoDev() {
    }

    /** {@code __dpa_global__ echo_handler}. */
    @DpaGlobal("echo_handler")
    static void echo(long ctx) {
        echoBody(ctx, true, true);
    }

    /** {@code __dpa_global__ echo_no_writeback}: the same handler without the write-back before the send doorbell. */
    @DpaGlobal("echo_no_writeback")
    static void echoNoWriteback(long ctx) {
        echoBody(ctx, false, true);
    }

    /**
     * {@code __dpa_global__ echo_no_arm}: the same handler rescheduling without {@code flexio_dev_cq_arm},
     * so the next CQE wakes nothing (the checker's C7). No sample runs it: {@code EchoTest} does, the
     * lost-wake-up check's test (it was flexio's {@code FlexioEchoTest}, with a copy of this handler).
     */
    @DpaGlobal("echo_no_arm")
    static void echoNoArm(long ctx) {
        echoBody(ctx, true, false);
    }

    /** {@code __dpa_rpc__ echo_count(ctx)}: how many messages the handler echoed (its state word). */
    @DpaRpc("echo_count")
    static long count(long ctx) {
        return Dpa.ld64(ctx + ECHOES);
    }

    private static void echoBody(long ctx, boolean writeback, boolean arm) {
        FlexioDev.outboxConfig((int) Dpa.ld64(ctx + OUTBOX));
        long ring = Dpa.ld64(ctx + RQ_CQ);
        int ci = (int) Dpa.ld64(ctx + RQ_CI);
        int pi = (int) Dpa.ld64(ctx + SQ_PI);
        long echoes = Dpa.ld64(ctx + ECHOES);
        while (true) {
            long cqe = FlexioDevQueue.cqeAt(ring, ci, LOG_CQ);
            if (FlexioDevQueue.cqeGetOwner(cqe) != (ci >>> LOG_CQ & 1)) {
                break;
            }
            if (FlexioDevQueue.cqeGetOpcode(cqe) != FlexioDevQueue.CQE_RESP_SEND) {
                FlexioDev.error(0x91);
            }
            int len = Math.min(FlexioDevQueue.cqeGetByteCnt(cqe), BUF);
            long rx = Dpa.ld64(ctx + RX) + (long) (FlexioDevQueue.cqeGetWqeCounter(cqe) & (1 << LOG_RQ) - 1) * BUF;
            long tx = Dpa.ld64(ctx + TX) + (long) (pi & (1 << LOG_SQ) - 1) * BUF;
            for (int i = 0; i < len; i++) {
                int c = Dpa.ld8(rx + i);
                Dpa.st8(tx + i, c >= 'a' && c <= 'z' ? c - 32 : c);
            }
            send(ctx, pi, tx, len);
            pi++;
            if (writeback) {
                Dpa.memoryWriteback(); // __dpa_thread_memory_writeback: the WQE and its data before the doorbell
            }
            FlexioDev.qpSqRingDb(pi, (int) Dpa.ld64(ctx + QPN));
            // the receive WQE is re-posted as it was: order it before the record, then write the record back
            Dpa.memoryFence(Dpa.W, Dpa.W);
            FlexioDevQueue.dbrRqIncPi(Dpa.ld64(ctx + QP_DBR));
            ci++;
            FlexioDevQueue.dbrCqSetCi(Dpa.ld64(ctx + RQ_CQ_DBR), ci);
            Dpa.memoryWriteback();
            echoes++;
        }
        drainSendCq(ctx);
        Dpa.st64(ctx + RQ_CI, ci);
        Dpa.st64(ctx + SQ_PI, pi);
        Dpa.st64(ctx + ECHOES, echoes);
        Dpa.memoryWriteback(); // the state the host reads by echo_count
        if (arm) {
            FlexioDev.cqArm(ci, (int) Dpa.ld64(ctx + RQ_CQN));
        }
        FlexioDev.threadReschedule();
    }

    private static void send(long ctx, int pi, long tx, int len) {
        long sq = Dpa.ld64(ctx + WQ) + ((long) (1 << LOG_RQ) << 4 + LOG_RQ_STRIDE);
        long wqe = FlexioDevQueue.swqeAt(sq, pi, LOG_SQ);
        FlexioDevQueue.swqeSegCtrlSet(wqe, pi, (int) Dpa.ld64(ctx + QPN), FlexioDevQueue.CTRL_CQ_UPDATE, FlexioDevQueue.OPCODE_SEND, 2, 0);
        FlexioDevQueue.swqeSegMemPtrDataSet(wqe + FlexioDevQueue.SEG_SIZE, len, (int) Dpa.ld64(ctx + MKEY), tx);
    }

    /** The send CQ: every completion consumed, the consumer index written back (the NIC reads it). */
    private static void drainSendCq(long ctx) {
        long ring = Dpa.ld64(ctx + SQ_CQ);
        int ci = (int) Dpa.ld64(ctx + SQ_CQ_CI);
        while (FlexioDevQueue.cqeGetOwner(FlexioDevQueue.cqeAt(ring, ci, LOG_CQ)) == (ci >>> LOG_CQ & 1)) {
            if (FlexioDevQueue.cqeGetOpcode(FlexioDevQueue.cqeAt(ring, ci, LOG_CQ)) != FlexioDevQueue.CQE_REQ) {
                FlexioDev.error(0x92);
            }
            ci++;
        }
        Dpa.st64(ctx + SQ_CQ_CI, ci);
        FlexioDevQueue.dbrCqSetCi(Dpa.ld64(ctx + SQ_CQ_DBR), ci);
        Dpa.memoryWriteback();
    }
}
