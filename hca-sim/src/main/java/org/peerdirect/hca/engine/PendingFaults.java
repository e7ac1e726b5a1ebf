package org.peerdirect.hca.engine;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The page faults an HCA raised and the driver has not yet resumed ({@code PAGE_FAULT_RESUME}):
 * token to the QP that waits (requester) or NAKs (responder), and how many faults each side raised.
 *
 * <p>Lock rules: concurrent: the engine's threads register faults, the command side resumes them.
 */
final class PendingFaults {

    /** A fault waiting for its resume: whose, and which side of the transport stopped. */
    private record PendingFault(HwQp qp, boolean requester, int subtype) {
    }

    private final ConcurrentHashMap<Integer, PendingFault> pending = new ConcurrentHashMap<>();
    private final AtomicInteger tokens = new AtomicInteger();
    final AtomicLong requesterFaults = new AtomicLong();
    final AtomicLong responderFaults = new AtomicLong();

    /**
     * Registers a fault about to be raised (the waiting side records the token first, so a resume
     * racing the event finds it): its token.
     */
    int register(HwQp qp, boolean requester, int subtype) {
        // mlx5's fault_token is 24 bits: tokens wrap there, skipping 0 and any still pending
        PendingFault pf = new PendingFault(qp, requester, subtype);
        int t;
        do {
            t = tokens.incrementAndGet() & 0xFF_FFFF;
        } while (t == 0 || pending.putIfAbsent(t, pf) != null);
        (requester ? requesterFaults : responderFaults).incrementAndGet();
        return t;
    }

    /** Resumes fault {@code token} ({@link HcaDevice#pageFaultResume}); false when no such fault is pending. */
    boolean resume(int token, boolean error) {
        PendingFault f = pending.remove(token);
        if (f == null) {
            return false;
        }
        if (f.requester) {
            f.qp.requester.resumeFault(token, error);
        } else {
            f.qp.resp.resumeFault(token, error ? f.subtype == PageFault.SUBTYPE_RDMA ? Outcome.REM_ACCESS_ERR : Outcome.REM_OP_ERR : null);
        }
        return true;
    }

    int size() {
        return pending.size();
    }

    /** Reset and removal: the QPs that waited are gone or flushed. */
    void clear() {
        pending.clear();
    }
}
