package org.peerdirect.flexio.dev;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The device half of {@code flexio_process_call} ([model], DPA_MODEL.md §2.5: NVIDIA's RPC
 * mechanism is not public): the runtime's RPC handler, a {@code __dpa_global__} entry every image
 * that links flexio-dev carries as {@value #SYMBOL}. The host library runs one thread of it per
 * process, its CQ bound to the thread. The host triggers a call by an RDMA WRITE-with-immediate
 * of the packed arguments into the argument buffer (the data path, no firmware command): the
 * immediate names the entry (low 16 bits, its symbol index) and the call's sequence number (high
 * 16 bits). The handler calls the entry, writes {@code {result, sequence}} through a window into
 * the host's mailbox and writes the window back; the host polls the mailbox's sequence word.
 *
 * <p>The thread's window entity 0 and outbox are the handler's once an entry returned: an entry
 * configures the window and outbox it uses at each call (a configuration does not outlive it).
 *
 * <p>The handler obeys the memory model as user code must (the checker sees its accesses): the
 * result is ordered before the sequence word by a window fence, both are written back before the
 * CQ is armed, and the CQ's consumer index is written back before the arm. A handler that forgot
 * the window write-back would leave the host waiting and the checker reporting the dirty mailbox
 * line (C3) at the activation's end.
 *
 * <p>Context at the thread argument (8-byte words, written by the host before the thread runs):
 * outbox id, cqn, CQ ring, CQ doorbell record, window id, mailbox mkey, mailbox host address, the
 * handler's consumer index; the argument buffer from {@link #ARGBUF}.
 */
public final class FlexioDevRpc {

    /** The symbol the host library names the RPC thread's entry by. */
    public static final String SYMBOL = "flexio_dev_rpc_handler";
    public static final int OUTBOX = 0, CQN = 8, CQ_RING = 16, CQ_DBR = 24, WINDOW = 32, MKEY = 40, MAILBOX = 48, CI = 56,
            ARGBUF = 64;
    /** log2 of the RPC CQ's depth: calls are one at a time, so two CQEs at most are outstanding. */
    public static final int LOG_CQ = 2;
    /** Mailbox words: the result, then the sequence number of the call it answers. */
    public static final int MAILBOX_RESULT = 0, MAILBOX_SEQ = 8;
    /** {@code flexio_dev_error} code of a CQE that is no WRITE-with-immediate (a corrupted channel). */
    public static final int ERROR_BAD_CQE = 0xfe;

    private FlexioDevRpc() {
    }

    /** {@value #SYMBOL}: drains the CQ, one call per CQE, then arms it and reschedules. */
    public static void rpcHandler(long ctx) {
        long ring = Dpa.ld64(ctx + CQ_RING);
        int ci = (int) Dpa.ld64(ctx + CI);
        while (true) {
            long cqe = FlexioDevQueue.cqeAt(ring, ci, LOG_CQ);
            if (FlexioDevQueue.cqeGetOwner(cqe) != (ci >>> LOG_CQ & 1)) {
                break;
            }
            if (FlexioDevQueue.cqeGetOpcode(cqe) != FlexioDevQueue.CQE_RESP_WR_IMM) {
                FlexioDev.error(ERROR_BAD_CQE);
            }
            int imm = FlexioDevQueue.cqeGetImm(cqe);
            long result = Dpa.call(imm & 0xffff, ctx + ARGBUF);
            // after the call: the entry may have configured entity 0 for its own window
            FlexioDev.windowConfig(FlexioDev.WINDOW_ENTITY_0, (int) Dpa.ld64(ctx + WINDOW), (int) Dpa.ld64(ctx + MKEY));
            long mailbox = FlexioDev.windowPtrAcquire(FlexioDev.WINDOW_ENTITY_0, Dpa.ld64(ctx + MAILBOX));
            Dpa.st64(mailbox + MAILBOX_RESULT, result);
            Dpa.windowFence(Dpa.W, Dpa.W); // the result before the sequence word the host polls
            Dpa.st64(mailbox + MAILBOX_SEQ, imm >>> 16);
            Dpa.windowWriteback();
            ci++;
            FlexioDevQueue.dbrCqSetCi(Dpa.ld64(ctx + CQ_DBR), ci);
            Dpa.memoryWriteback(); // the consumer index the NIC reads before the arm
        }
        Dpa.st64(ctx + CI, ci);
        FlexioDev.outboxConfig((int) Dpa.ld64(ctx + OUTBOX)); // after the calls, for the same reason
        FlexioDev.cqArm(ci, (int) Dpa.ld64(ctx + CQN));
        FlexioDev.threadReschedule();
    }
}
