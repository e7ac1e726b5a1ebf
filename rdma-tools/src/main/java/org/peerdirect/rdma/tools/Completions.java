package org.peerdirect.rdma.tools;

import java.time.Duration;

import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;

/**
 * Waiting for completions, as every tool does it: bounded in time (a tool never hangs), polite to
 * the other side's thread (2-core machines), ended by Ctrl-C, and a failed completion reported
 * with ibv_rc_pingpong's wording ({@code Failed status ... for wr_id ...}).
 */
final class Completions {

    /** A bounded wait for any completion: a tool never hangs. */
    static final long TIMEOUT_NS = 60_000_000_000L;

    private Completions() {
    }

    /**
     * One poll: true with a successful completion in {@code wc[0]}, false when none is there;
     * a failed completion or a CQ in error is an exception with ibv_rc_pingpong's wording.
     */
    static boolean pollOk(IbvCq cq, IbvWc[] wc, String what) {
        int n = cq.poll(1, wc);
        if (n < 0) {
            throw new IllegalStateException(what + ": the CQ is in error (overrun or device removed)");
        }
        if (n == 1 && wc[0].status != IbvWcStatus.SUCCESS) {
            throw new IllegalStateException(String.format("%s: Failed status %s (%d) for wr_id %d", what, wc[0].status.str(),
                    wc[0].status.ordinal(), wc[0].wrId));
        }
        return n == 1;
    }

    /** Polls until one completion, which must succeed, and returns it; bounded in time. */
    static IbvWc waitOk(IbvCq cq, IbvWc[] wc, String what) {
        long deadline = System.nanoTime() + TIMEOUT_NS;
        for (int spins = 0;; spins++) {
            if (pollOk(cq, wc, what)) {
                return wc[0];
            }
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException(what + ": no completion within 60 s");
            }
            relax(spins);
        }
    }

    /**
     * ibv_rc_pingpong -e: sleep on the completion channel instead of spinning. Arm, poll once
     * (a completion may have come before arming), else wait for the event, acknowledge it, re-arm.
     */
    static IbvWc waitEvent(Endpoint e, IbvWc[] wc, String what) {
        long deadline = System.nanoTime() + TIMEOUT_NS;
        for (;;) {
            e.cq.reqNotify(false);
            if (pollOk(e.cq, wc, what)) {
                return wc[0];
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new IllegalStateException(what + ": no completion event within 60 s");
            }
            try {
                IbvCq ev = e.channel.getCqEvent(Duration.ofNanos(left));
                if (ev != null) {
                    e.channel.ackCqEvents(ev, 1);
                }
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(what + ": interrupted while waiting for a completion event");
            }
        }
    }

    /** Posts one signalled work request on {@code e}'s QP 0 and waits (bounded) for its successful completion. */
    static void complete(Endpoint e, IbvSendWr w, String what) {
        e.qps[0].postSend(w);
        waitOk(e.cq, new IbvWc[] {new IbvWc()}, what);
    }

    /**
     * Ctrl-C: the shell interrupts the command's thread; every polling loop of the tools calls
     * this, so the command ends within one poll and the container does not keep both cores busy.
     * The interrupt status is kept for the caller.
     */
    static void checkInterrupted(String what) {
        if (Thread.currentThread().isInterrupted()) {
            throw new IllegalStateException(what + ": interrupted");
        }
    }

    /** Busy-poll politely: spin, then let the peer's thread have the core (2-core machines). */
    static void relax(int spins) {
        checkInterrupted("rdma");
        if ((spins & 63) == 63) {
            Thread.yield();
        } else {
            Thread.onSpinWait();
        }
    }
}
