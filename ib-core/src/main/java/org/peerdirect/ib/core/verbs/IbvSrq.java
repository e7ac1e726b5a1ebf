package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_srq}: receive requests shared by the QPs created with it. */
@ProviderType
public interface IbvSrq {

    /** {@code ibv_post_srq_recv}. */
    void postRecv(IbvRecvWr wr);

    void destroy();
}
