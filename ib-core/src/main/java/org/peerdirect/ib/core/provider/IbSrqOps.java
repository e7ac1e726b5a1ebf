package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;

/** {@code struct ib_srq}'s driver part. */
@ConsumerType
public interface IbSrqOps {

    /** {@code post_srq_recv}. */
    void postSrqRecv(IbvRecvWr wr);

    /**
     * {@code modify_srq}: the core passes only {@link org.peerdirect.ib.core.verbs.IbvSrqAttr#MAX_WR}
     * and {@link org.peerdirect.ib.core.verbs.IbvSrqAttr#LIMIT}; the driver checks the values as
     * its kernel twin does (a limit not below the SRQ's size EINVAL; a resize it cannot do EINVAL)
     * and arms the hardware.
     */
    void modifySrq(org.peerdirect.ib.core.verbs.IbvSrqAttr attr, int mask);

    /** {@code query_srq}: {@code max_wr}, {@code max_sge} and the limit the hardware holds armed (0 when not). */
    org.peerdirect.ib.core.verbs.IbvSrqAttr querySrq();

    /** {@code destroy_srq}: the core checked that no QP uses it. */
    void destroySrq();

    /** {@code get_srq_num}: the hardware's SRQ number (what an XRC sender names). @since 0.6 */
    int srqNum();
}
