package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_pd}. */
@ProviderType
public interface IbvPd {

    IbvContext context();

    /**
     * {@code ibv_reg_mr} of [addr, addr+length) of the context's process with {@code IbAccess}
     * flags. Pinned memory, or peer memory when pinning refuses the range and a peer client claims
     * it. Remote write or atomic without local write is EINVAL; {@code ON_DEMAND} on a device
     * without ODP is EOPNOTSUPP.
     */
    IbvMr regMr(long addr, long length, int access);

    /** {@code ibv_create_qp}. */
    IbvQp createQp(IbvQpInitAttr attr);

    /** {@code ibv_create_srq}. */
    IbvSrq createSrq(int maxWr, int maxSge);

    /** {@code ibv_create_ah}: an address handle to port {@code portNum}'s peer with LID {@code dlid}. */
    IbvAh createAh(int dlid, int portNum);

    /** {@code ibv_dealloc_pd}: EBUSY while objects use it. */
    void dealloc();
}
