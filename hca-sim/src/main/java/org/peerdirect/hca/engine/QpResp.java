package org.peerdirect.hca.engine;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * A QP's responder state ({@code struct rxe_resp_info}, {@code qp->resp} in rxe): the expected
 * PSN, the atomic resource, the on-demand-paging fault the responder raised, COMM_EST, the wire
 * responder's state, and the count of requests inside the responder that a reset waits for. The
 * responder code itself is {@link Responder} (in-device peers) and {@link WireResp} (the wire),
 * as {@code rxe_resp.c}; the QP's state machine that resets this is {@link HwQp} ({@code rxe_qp.c}).
 *
 * <p>Lock rules: none of its own. The fields are written by the one thread that answers the QP's
 * requests at a time (the connected requester's drain loop, or the link's receive thread) and by
 * the QP's transition commands (under the QP's monitor) while the QP does not receive; see
 * {@link #responders} for how a reset and a responder meet.
 */
final class QpResp {

    private final HwQp qp;

    /** Expected PSN ({@code resp.psn}): written by the connected requester's thread, which holds its own drain loop. */
    int ePsn;
    /**
     * Responder side of on-demand paging. {@link #fault}: the token of a fault this QP's
     * responder raised and the driver has not resumed (0: none); while set, requests are answered
     * with RNR NAKs and raise no new event. {@link #faultError}: the outcome the next request gets
     * after a resume with the error flag (null: none).
     */
    volatile int fault;
    volatile Outcome faultError;
    /**
     * The responder's atomic resource (IBA 9.4.5): the PSN and original value of the last atomic
     * it executed whose response the requester could not place (its result page was not present).
     * The requester's retry of that PSN is a duplicate: it gets the saved value, the atomic does not
     * execute twice. Written by the connected requester's thread (its drain loop); -1: none.
     */
    volatile int atomicReplayPsn = -1;
    long atomicReplayValue;
    /** COMM_EST raised in this trip through RTR (written by the requester thread of the connected QP; reset by RST2INIT). */
    private volatile boolean commEst;
    /** On a wire: the responder's state ({@link WireResp}; the link's receive thread), dropped by a reset. */
    private volatile WireResp.State wire;
    /**
     * Threads inside this QP's responder ({@link #enter} .. {@link #exit}). A responder runs in a
     * peer's requester thread or the wire's receive thread, so the QP's own
     * {@link Requester#quiesce} does not wait for it; it consumes a receive WQE, places data and
     * pushes the receive CQE (after the receive queue's lock is released), and moves the expected
     * PSN. Incremented (a full fence) before the state is read; a reset writes the state and then
     * reads this: one of the two always sees the other (as {@link Requester}'s wip).
     */
    private final AtomicInteger responders = new AtomicInteger();

    QpResp(HwQp qp) {
        this.qp = qp;
    }

    /** A move to RST forgets what the responder knew (after the QP's state was set: see {@link HwQp#modify}). */
    void reset() {
        wire = null;
        commEst = false;
        fault = 0;
        faultError = null;
        atomicReplayPsn = -1;
    }

    /** The responder's wire state, made on the receive thread's first request (its only user). */
    WireResp.State wireState() {
        WireResp.State s = wire;
        if (s == null) {
            s = new WireResp.State();
            wire = s;
        }
        return s;
    }

    /** The responder's first packet in RTR ({@code COMM_EST}), once per trip through RTR. */
    void receivedInRtr() {
        if (!commEst && qp.state == HwQpState.RTR) {
            commEst = true;
            qp.dev.asyncEvent(AsyncEventHandler.COMM_EST, qp.qpn);
        }
    }

    /**
     * What the responder answers before looking at a request: an RNR NAK while one of its faults
     * is being served, the error of a fault resumed with the error flag (once), or null.
     */
    Outcome faultOutcome() {
        if (fault != 0) {
            return Outcome.RNR_NAK;
        }
        Outcome e = faultError;
        if (e != null) {
            faultError = null;
        }
        return e;
    }

    /** {@code PAGE_FAULT_RESUME} of a responder fault: stop NAKing; {@code error}: the next request's outcome. */
    void resumeFault(int token, Outcome error) {
        if (fault == token) {
            faultError = error;
            fault = 0;
        }
    }

    // ------------------------------------------------------------------ requests inside the responder

    /**
     * A request enters this QP's responder: true when the QP receives (RTR, RTS, SQD); then the
     * caller must {@link #exit} after its last effect on the QP (the receive CQE, the expected
     * PSN, a move to ERR). False: the QP does not receive, nothing entered.
     */
    boolean enter() {
        responders.getAndIncrement();
        if (qp.state.receives()) {
            return true;
        }
        responders.getAndDecrement();
        return false;
    }

    /** Requests inside the responder now (a snapshot; diagnostics and tests). */
    int inFlight() {
        return responders.get();
    }

    /** The request {@link #enter} admitted is done with this QP. */
    void exit() {
        responders.getAndDecrement();
    }

    /**
     * After the state left the receiving states (RST, ERR, destroyed): waits until no request is
     * inside the responder, so nothing of it (a receive CQE, data in a receive buffer, the
     * expected PSN) lands after the command returns: Linux's driver cleans the QP's CQEs from the
     * CQ right after 2RST_QP ({@code mlx5_ib_cq_clean}, {@code mlx4_cq_clean}) and posts receives
     * anew. Bounded (10 s); called from command paths only, never from a responder, by the rule
     * {@link Requester#quiesce} states (the engine's threads run no driver code: events are posted
     * to event queues).
     */
    void awaitIdle() {
        if (responders.get() == 0) {
            return;
        }
        qp.stats.responderWaits.incrementAndGet();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (responders.get() != 0) {
            if (System.nanoTime() > deadline) {
                System.getLogger("org.peerdirect.hca").log(System.Logger.Level.WARNING, qp + ": a request still in its responder after 10 s");
                return;
            }
            Thread.onSpinWait();
        }
    }
}
