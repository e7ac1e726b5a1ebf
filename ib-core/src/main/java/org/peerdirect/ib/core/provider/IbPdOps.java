package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;

/** {@code struct ib_pd}'s driver part and the objects created in it. */
@ConsumerType
public interface IbPdOps {

    /**
     * {@code reg_user_mr}: the access flags were checked by the core. The driver gets the umem
     * ({@code ib_umem_get}), programs the key, and arms the umem's invalidation notifier.
     */
    IbMrOps regUserMr(long addr, long length, int access);

    /**
     * {@code create_qp}. The core checked the capabilities against the device's attributes and
     * that the CQs and SRQ are of this context; it passes the driver's own objects for them.
     */
    IbQpOps createQp(IbvQpInitAttr attr, IbCqOps sendCq, IbCqOps recvCq, IbSrqOps srq);

    /** {@code create_srq}. */
    IbSrqOps createSrq(int maxWr, int maxSge);

    /** {@code create_ah}: an address vector to LID {@code dlid} through port {@code portNum}. */
    IbAhOps createAh(int dlid, int portNum);

    /** {@code dealloc_pd}: the core checked that nothing uses it. */
    void deallocPd();
}
