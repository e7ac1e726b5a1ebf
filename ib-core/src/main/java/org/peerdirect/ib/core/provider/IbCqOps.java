package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.ib.core.verbs.IbvWc;

/** {@code struct ib_cq}'s driver part: {@code poll_cq} runs in the user's process (libmlx4's part). */
@ConsumerType
public interface IbCqOps {

    /**
     * {@code poll_cq}: up to {@code n} completions into {@code wc[0..n)}; how many, or -1 when the
     * CQ is in error. Never blocks, never allocates; still drains flushed completions after the
     * device was removed.
     */
    int poll(int n, IbvWc[] wc);

    /** {@code req_notify_cq}. */
    void reqNotify(boolean solicitedOnly);

    /** The number of entries. */
    int cqe();

    /** {@code destroy_cq}: the core checked that no QP uses it. */
    void destroyCq();
}
