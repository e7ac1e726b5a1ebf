package org.peerdirect.hca.engine;

import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * A ring of receive WQEs (a QP's RQ or an SRQ), preallocated. Lock rules: {@link #lock} guards
 * the ring; the responder takes it to consume, {@code post} to produce.
 */
final class RecvQueue {

    static final class Wqe {
        long wrId;
        int numSge;
        final long[] addr;
        final int[] len;
        final int[] lkey;

        Wqe(int maxSge) {
            addr = new long[Math.max(1, maxSge)];
            len = new int[Math.max(1, maxSge)];
            lkey = new int[Math.max(1, maxSge)];
        }
    }

    final Wqe[] ring;
    final int maxSge;
    final ReentrantLock lock = new ReentrantLock();
    int head;
    int count;

    RecvQueue(int maxWr, int maxSge) {
        this.maxSge = maxSge;
        ring = new Wqe[Math.max(1, maxWr)];
        for (int i = 0; i < ring.length; i++) {
            ring[i] = new Wqe(maxSge);
        }
    }

    /**
     * Copies the chain in; caller holds {@link #lock}. {@code qpn} names the owner in errors
     * ({@code -1} for an SRQ); the message is built only when a request is refused, so the post
     * path allocates nothing.
     */
    void postLocked(IbvRecvWr wr, String device, int qpn) {
        for (IbvRecvWr w = wr; w != null; w = w.next) {
            if (w.numSge < 0 || w.numSge > maxSge) {
                throw new PostException(Errno.EINVAL, who(device, qpn) + ": receive request " + w.wrId + " has " + w.numSge + " SGEs, max " + maxSge, w);
            }
            if (count == ring.length) {
                throw new PostException(Errno.ENOMEM, who(device, qpn) + ": receive queue full (" + ring.length + " requests)", w);
            }
            Wqe q = ring[(head + count) % ring.length];
            q.wrId = w.wrId;
            q.numSge = w.numSge;
            for (int i = 0; i < w.numSge; i++) {
                q.addr[i] = w.sgList[i].addr;
                q.len[i] = w.sgList[i].length;
                q.lkey[i] = w.sgList[i].lkey;
            }
            count++;
        }
    }

    private static String who(String device, int qpn) {
        return qpn < 0 ? device + " SRQ" : String.format("QP 0x%x", qpn);
    }

    /** The head WQE, or null; caller holds the lock and calls {@link #consumeLocked} to take it. */
    Wqe peekLocked() {
        return count == 0 ? null : ring[head];
    }

    void consumeLocked() {
        head = (head + 1) % ring.length;
        count--;
    }
}
