package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_cq}. */
@ProviderType
public interface IbvCq {

    /**
     * {@code ibv_poll_cq}: moves up to {@code n} completions into {@code wc[0..n)}; returns how many,
     * or -1 when the CQ is in error (overrun) or its device is gone. Never blocks, never allocates.
     */
    int poll(int n, IbvWc[] wc);

    /** {@code ibv_req_notify_cq}: the next completion (solicited only, if asked) raises an event on the channel. */
    void reqNotify(boolean solicitedOnly);

    IbvCompChannel channel();

    /** The number of entries. */
    int cqe();

    /** {@code ibv_destroy_cq}: EBUSY while a QP uses it; idempotent (once destroyed, by the user or the context's close, nothing). */
    void destroy();
}
