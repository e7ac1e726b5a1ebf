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
    final RecvQueue rq;
    /** QPs attached; HW2SW_SRQ is refused while non-zero. Changed under the device monitor. */
    final AtomicInteger users = new AtomicInteger();
    /** Guarded by the device monitor. */
    boolean destroyed;

    HwSrq(HcaDevice dev, int srqn, int pdn, int maxWr, int maxSge) {
        this.dev = dev;
        this.srqn = srqn;
        this.pdn = pdn;
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

    public RecvQueue queue() {
        return rq;
    }

    /** The SRQ's doorbell record: the driver's new producer index. */
    public void doorbell(long producerIndex) {
        rq.doorbell(producerIndex);
    }
}
