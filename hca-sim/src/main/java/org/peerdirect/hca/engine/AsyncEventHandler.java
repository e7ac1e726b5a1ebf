package org.peerdirect.hca.engine;

/**
 * Where the engine reports the affiliated asynchronous events of its QPs and SRQs, as the
 * hardware writes them to its async event queue: the event type (the EQE type codes the mlx4 and
 * mlx5 PRMs share, {@code enum mlx4_event} / {@code enum mlx5_event}) and the QP or SRQ number.
 * The ConnectX-4+ personality turns them into EQEs; the ConnectX-3 personality's driver installs
 * it directly (the documented firmware shortcut, as {@link CqEventHandler}). Called on the engine
 * thread that found the event, with no engine lock held but the QP's monitor on a transition to
 * ERR; it must not block nor call back into the QP.
 */
@FunctionalInterface
public interface AsyncEventHandler {

    /** A QP in RTR received its first packet. */
    int COMM_EST = 0x02;
    /** A QP's work queue met an error it cannot report in a CQE (the responder's class C error: a remote operational error). */
    int WQ_CATAS_ERROR = 0x05;
    /** The responder found an invalid request (class C: opcode not allowed, length out of range); the QP went to ERR. */
    int WQ_INVAL_REQ_ERROR = 0x10;
    /** The responder found a remote access violation (class C: bad rkey, rights, range); the QP went to ERR. */
    int WQ_ACCESS_ERROR = 0x11;
    /** A QP receiving through an SRQ went to ERR: no WQE of the SRQ will be consumed for it any more. */
    int SRQ_LAST_WQE = 0x13;
    /** An armed SRQ's WQE count dropped below its limit (the SRQ disarmed). */
    int SRQ_LIMIT = 0x14;

    /** Port change subtype: the link went down ({@code PORT_CHANGE_SUBTYPE_DOWN}). */
    int PORT_DOWN = 1;
    /** Port change subtype: the link is up and the port active ({@code PORT_CHANGE_SUBTYPE_ACTIVE}). */
    int PORT_ACTIVE = 4;

    /**
     * A port's state changed (the PRMs' {@code PORT_CHANGE} event, 0x09, with subtype {@link #PORT_DOWN} or {@link #PORT_ACTIVE}).
     * Ignored by default.
     */
    default void portEvent(int port, int subtype) {
    }

    /**
     * @param type   one of the constants above
     * @param number the QP number, or the SRQ number for {@link #SRQ_LIMIT}
     */
    void event(int type, int number);
}
