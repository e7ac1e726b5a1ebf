package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_srq}: receive requests shared by the QPs created with it. */
@ProviderType
public interface IbvSrq {

    /** {@code ibv_post_srq_recv}. */
    void postRecv(IbvRecvWr wr);

    /**
     * {@code ibv_modify_srq}: {@link IbvSrqAttr#LIMIT} arms (or, with 0, disarms) the limit event;
     * a limit not below the SRQ's size, a resize the driver cannot do, or an unknown mask bit is
     * EINVAL.
     */
    void modify(IbvSrqAttr attr, int attrMask);

    /** {@code ibv_query_srq}: the size and the armed limit (0 once the event fired). */
    IbvSrqAttr query();

    /** {@code ibv_destroy_srq}: EBUSY while a QP uses it; idempotent. */
    void destroy();

    /**
     * {@code ibv_get_srq_num}: the SRQ's number, what an XRC sender puts in
     * {@link IbvSendWr#remoteSrqn} to reach this XRC SRQ. @since 0.10
     */
    int srqNum();
}
