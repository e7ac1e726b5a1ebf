package org.peerdirect.hca.dpa;

/**
 * What the DPA asks of the NIC it sits in: the outbox doorbells, and the queue facts the outbox
 * isolation rule and the lost-wake-up check need. The ConnectX firmware implements it when the
 * lead wires the DPA in; doorbells arrive on the hart's thread (an MMIO write the NIC takes at
 * once). The NIC calls back into {@link DpaUnit#cqEvent} when a CQE lands on an armed CQ whose
 * element is a DPA thread, and reads DPA memory only through {@link DpaUnit#nicRead} (so the
 * memory model sees what it fetches).
 */
public interface DpaNic {

    enum QueueKind {
        CQ, SQ, EQ
    }

    /**
     * A CQ's arming state for the lost-wake-up check and {@code dpa:threads}: armed, and the
     * completion events it has raised ({@code armed} and {@code eventsRaised} one snapshot; an
     * event raised and not yet received by {@link DpaUnit#cqEvent} is on its way).
     */
    record CqState(boolean armed, long eventsRaised, long producerIndex, long consumerIndex) {
    }

    /** The uid (DevX user context) owning queue {@code number}, -1 when there is none. */
    int ownerUid(QueueKind kind, int number);

    /** {@code CQ_DB}: arm CQ {@code cqn} with consumer index {@code ci} (fires at once if CQEs at or past ci exist). */
    void cqArm(int cqn, int ci);

    /** {@code SXD_DB}: send queue (or QP) {@code qn}'s new producer index {@code pi} (16 bits). */
    void sqDoorbell(int qn, int pi);

    /** {@code RXT_DB}: a zero CQE on CQ {@code cqn} (triggers its thread, or its EQ and MSI-X). */
    void zeroCqe(int cqn);

    /** {@code EQ_DB_NO_REARM}: EQ {@code eqn}'s consumer index without re-arming. */
    void eqUpdateCi(int eqn, int ci);

    /** CQ {@code cqn}'s state; null when unknown. */
    CqState cqState(int cqn);
}
