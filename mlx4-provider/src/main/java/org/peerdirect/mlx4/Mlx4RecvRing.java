package org.peerdirect.mlx4;

import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongConsumer;

import org.peerdirect.hca.engine.RecvQueue;
import org.peerdirect.hca.engine.RecvWqe;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The producer side of a receive queue (a QP's or an SRQ's, libmlx4's {@code mlx4_post_recv} and
 * {@code mlx4_post_srq_recv}): builds receive WQEs into the hardware's slots, keeps their
 * work-request ids by WQE index, and writes the doorbell record. Lock rules: {@link #lock} guards
 * {@link #tail} and the slots between the hardware's consumer index and the tail.
 */
final class Mlx4RecvRing {

    private final RecvQueue rq;
    private final int maxSge;
    private final long[] wrid;
    private final int mask;
    private final LongConsumer doorbell;
    private final String who;
    private final ReentrantLock lock = new ReentrantLock();
    private long tail;

    Mlx4RecvRing(RecvQueue rq, LongConsumer doorbell, String who) {
        this(rq, rq.maxSge(), doorbell, who);
    }

    /** A ring whose requests may carry at most {@code maxSge} entries (what the user asked for, below the WQE's room). */
    Mlx4RecvRing(RecvQueue rq, int maxSge, LongConsumer doorbell, String who) {
        this.maxSge = maxSge;
        this.rq = rq;
        this.wrid = new long[rq.size()];
        this.mask = wrid.length - 1; // the hardware's ring sizes are powers of two
        this.doorbell = doorbell;
        this.who = who;
    }

    /**
     * Posts the chain; a refused request throws {@link PostException} naming it, after the ones
     * before it were posted and rung. The message is built only on refusal.
     */
    void post(IbvRecvWr wr) {
        lock.lock();
        long first = tail;
        try {
            for (IbvRecvWr w = wr; w != null; w = w.next) {
                if (w.numSge < 0 || w.numSge > maxSge || w.numSge > w.sgList.length) {
                    throw new PostException(Errno.EINVAL, who + ": receive request " + w.wrId + " has " + w.numSge + " SGEs, max "
                            + maxSge, w);
                }
                if (tail - rq.consumerIndex() == rq.size()) {
                    throw new PostException(Errno.ENOMEM, who + ": receive queue full (" + rq.size() + " requests)", w);
                }
                RecvWqe q = rq.slot(tail);
                q.numSge = w.numSge;
                for (int i = 0; i < w.numSge; i++) {
                    q.addr[i] = w.sgList[i].addr;
                    q.byteCount[i] = w.sgList[i].length;
                    q.lkey[i] = w.sgList[i].lkey;
                }
                wrid[(int) tail & mask] = w.wrId;
                tail++;
            }
        } finally {
            if (tail != first) {
                doorbell.accept(tail); // the requests before a refused one are posted
            }
            lock.unlock();
        }
    }

    /** The work-request id of receive WQE {@code index}. */
    long wrid(long index) {
        return wrid[(int) index & mask];
    }
}
