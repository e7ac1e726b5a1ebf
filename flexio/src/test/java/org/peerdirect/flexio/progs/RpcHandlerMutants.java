package org.peerdirect.flexio.progs;

import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.flexio.dev.FlexioDevQueue;
import org.peerdirect.flexio.dev.FlexioDevRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Mutants of flexio-dev's RPC handler ({@link FlexioDevRpc#rpcHandler}), linked under its symbol
 * in place of the real one: {@link #rpcHandlerNoWriteback} writes the mailbox through the window
 * but never writes it back; {@link #rpcCallsAHandler} is an RPC entry calling a symbol that is no
 * {@code __dpa_rpc__} entry.
 */
public final class RpcHandlerMutants {

    private RpcHandlerMutants() {
    }

    /** The real handler without {@code __dpa_thread_window_writeback}: the host never sees the answer. */
    public static void rpcHandlerNoWriteback(long ctx) {
        long ring = Dpa.ld64(ctx + FlexioDevRpc.CQ_RING);
        int ci = (int) Dpa.ld64(ctx + FlexioDevRpc.CI);
        while (FlexioDevQueue.cqeGetOwner(FlexioDevQueue.cqeAt(ring, ci, FlexioDevRpc.LOG_CQ)) == (ci >>> FlexioDevRpc.LOG_CQ & 1)) {
            int imm = FlexioDevQueue.cqeGetImm(FlexioDevQueue.cqeAt(ring, ci, FlexioDevRpc.LOG_CQ));
            long result = Dpa.call(imm & 0xffff, ctx + FlexioDevRpc.ARGBUF);
            FlexioDev.windowConfig(FlexioDev.WINDOW_ENTITY_0, (int) Dpa.ld64(ctx + FlexioDevRpc.WINDOW),
                    (int) Dpa.ld64(ctx + FlexioDevRpc.MKEY));
            long mailbox = FlexioDev.windowPtrAcquire(FlexioDev.WINDOW_ENTITY_0, Dpa.ld64(ctx + FlexioDevRpc.MAILBOX));
            Dpa.st64(mailbox + FlexioDevRpc.MAILBOX_RESULT, result);
            Dpa.windowFence(Dpa.W, Dpa.W);
            Dpa.st64(mailbox + FlexioDevRpc.MAILBOX_SEQ, imm >>> 16); // no window write-back: the mutation
            ci++;
            FlexioDevQueue.dbrCqSetCi(Dpa.ld64(ctx + FlexioDevRpc.CQ_DBR), ci);
            Dpa.memoryWriteback();
        }
        Dpa.st64(ctx + FlexioDevRpc.CI, ci);
        FlexioDev.outboxConfig((int) Dpa.ld64(ctx + FlexioDevRpc.OUTBOX));
        FlexioDev.cqArm(ci, (int) Dpa.ld64(ctx + FlexioDevRpc.CQN));
        FlexioDev.threadReschedule();
    }

    /** {@code __dpa_rpc__}: calls symbol 0, the RPC handler, a {@code __dpa_global__}: the process ends 0x42. */
    public static long rpcCallsAHandler(long argbuf) {
        return Dpa.call(0, argbuf);
    }
}
