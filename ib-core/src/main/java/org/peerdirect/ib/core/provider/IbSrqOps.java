package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;

/** {@code struct ib_srq}'s driver part. */
@ConsumerType
public interface IbSrqOps {

    /** {@code post_srq_recv}. */
    void postSrqRecv(IbvRecvWr wr);

    /** {@code destroy_srq}: the core checked that no QP uses it. */
    void destroySrq();
}
