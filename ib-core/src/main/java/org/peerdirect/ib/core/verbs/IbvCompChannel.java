package org.peerdirect.ib.core.verbs;

import java.time.Duration;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_comp_channel}. */
@ProviderType
public interface IbvCompChannel {

    /**
     * {@code ibv_get_cq_event}: waits up to {@code timeout} for a CQ event; returns the CQ, or null
     * on timeout. EIO once the device is gone.
     */
    IbvCq getCqEvent(Duration timeout) throws InterruptedException;

    /** {@code ibv_ack_cq_events}. */
    void ackCqEvents(IbvCq cq, int n);

    /**
     * {@code ibv_destroy_comp_channel}: EBUSY while CQ events are not acknowledged; idempotent, and
     * nothing after the context's close destroyed it.
     */
    void destroy();
}
