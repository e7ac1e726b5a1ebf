package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;

/** {@code struct ib_qp}'s driver part. */
@ConsumerType
public interface IbQpOps {

    int qpNum();

    /** The state the hardware reports (it moves to ERR by itself on transport errors). */
    IbvQpState state();

    /** {@code modify_qp}: the core checked the transition, the mask and the ranges. */
    void modifyQp(IbvQpAttr attr, int attrMask);

    /** {@code query_qp}. */
    IbvQpAttr queryQp();

    /**
     * {@code post_send} (user space: build WQEs, ring the doorbell). Throws
     * {@link org.peerdirect.ib.core.verbs.PostException} naming the first request not posted.
     */
    void postSend(IbvSendWr wr);

    /** {@code post_recv}. */
    void postRecv(IbvRecvWr wr);

    /** {@code destroy_qp}; must succeed after the device was removed. */
    void destroyQp();
}
