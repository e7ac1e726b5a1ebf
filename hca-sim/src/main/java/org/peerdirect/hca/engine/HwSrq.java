package org.peerdirect.hca.engine;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * A shared receive queue ({@code SW2HW_SRQ}): receive WQEs shared by the QPs created with it. A
 * receive completion of such a QP reports the WQE index in this queue.
 */
public final class HwSrq {

    final HcaDevice dev;
    public final int srqn;
    final int pdn;
    /**
     * An XRC SRQ's XRC domain (-1: a basic SRQ). An XRC SRQ is named by the XRCETH of each
     * message that reaches an XRC target QP of the same domain; its receives complete to
     * {@link #cq}, and its PD is the one the message's memory accesses are checked against.
     */
    final int xrcdn;
    /** An XRC SRQ's completion queue (null for a basic SRQ, whose receives complete to the QP's receive CQ). */
    final HwCq cq;
    final RecvQueue rq;
    /** QPs attached; HW2SW_SRQ is refused while non-zero. Changed under the device monitor. */
    final AtomicInteger users = new AtomicInteger();
    /** Guarded by the device monitor. */
    boolean destroyed;

    HwSrq(HcaDevice dev, int srqn, int pdn, int xrcdn, HwCq cq, int maxWr, int maxSge) {
        this.dev = dev;
        this.srqn = srqn;
        this.pdn = pdn;
        this.xrcdn = xrcdn;
        this.cq = cq;
        this.rq = new RecvQueue(maxWr, maxSge);
        rq.onLimit(() -> dev.asyncEvent(AsyncEventHandler.SRQ_LIMIT, srqn));
    }

    /**
     * {@code ARM_SRQ} (mlx4) / {@code ARM_RQ} (mlx5): raise {@link AsyncEventHandler#SRQ_LIMIT}
     * once when fewer than {@code lwm} WQEs remain; 0 disarms. A limit beyond the queue's slots is
     * a bad parameter.
     */
    public void arm(int lwm) {
        dev.alive();
        if (lwm < 0 || lwm > rq.size()) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format("SRQ 0x%x: lwm %d is not 0..%d", srqn, lwm, rq.size()));
        }
        rq.arm(lwm);
    }

    /** The armed limit (0: not armed, or the event fired). */
    public int limit() {
        return rq.limit();
    }

    /** The XRC domain of an XRC SRQ, -1 for a basic SRQ. */
    public int xrcdn() {
        return xrcdn;
    }

    public RecvQueue queue() {
        return rq;
    }
}
