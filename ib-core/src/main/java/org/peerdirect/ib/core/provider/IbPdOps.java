package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/** {@code struct ib_pd}'s driver part and the objects created in it. */
@ConsumerType
public interface IbPdOps {

    /**
     * {@code reg_user_mr}: the access flags were checked by the core. The driver gets the umem
     * ({@code ib_umem_get}), programs the key, and arms the umem's invalidation notifier.
     */
    IbMrOps regUserMr(long addr, long length, int access);

    /**
     * {@code reg_user_mr} with {@code virt_addr} other than {@code start}
     * ({@code ibv_reg_mr_iova}, {@code ibv_reg_mr_ex} with an iova): [addr, addr+length) of the
     * process seen through the keys at {@code iova} (the core checked that both have the same page
     * offset and the access flags). A driver without it keeps this default, EOPNOTSUPP.
     *
     * @since 0.7
     */
    default IbMrOps regUserMr(long addr, long length, long iova, int access) {
        throw new KernelException(Errno.EOPNOTSUPP, String.format("ibv_reg_mr_iova: Operation not supported: the driver maps an MR at "
                + "its address only (iova 0x%x for address 0x%x)", iova, addr));
    }

    /**
     * {@code reg_user_mr_dmabuf}: the core checked the access flags, the page offsets of
     * {@code offset} and {@code iova} and the range. A driver without it keeps this default, and
     * the verb is EOPNOTSUPP, as {@code UVERBS_METHOD_REG_DMABUF_MR} answers for such a driver.
     */
    default IbMrOps regUserMrDmabuf(long offset, long length, long iova, int fd, int access) {
        throw new KernelException(Errno.EOPNOTSUPP, "ibv_reg_dmabuf_mr: Operation not supported: the driver has no reg_user_mr_dmabuf");
    }

    /**
     * Whether {@link #regUserMrDmabuf} is implemented: the kernel tests the op pointer
     * ({@code ib_dev->ops.reg_user_mr_dmabuf}) before it looks at any argument, so a driver without
     * it answers EOPNOTSUPP whatever the arguments. A driver that implements the op returns true.
     */
    default boolean hasRegUserMrDmabuf() {
        return false;
    }

    /**
     * {@code advise_mr}: the core checked the flags and that there is at least one SGE; the driver
     * checks the advice and each lkey. A driver without ODP keeps this default, as a kernel driver
     * without the op ({@code ib_dev->ops.advise_mr == NULL}).
     */
    default void adviseMr(int advice, int flags, IbvSge[] sgList) {
        throw new KernelException(Errno.EOPNOTSUPP, "ibv_advise_mr: Operation not supported: the driver has no advise_mr");
    }

    /**
     * {@code create_qp}. The core checked the capabilities against the device's attributes and
     * that the CQs and SRQ are of this context; it passes the driver's own objects for them, and
     * the handler of the QP's asynchronous events.
     */
    IbQpOps createQp(IbvQpInitAttr attr, IbCqOps sendCq, IbCqOps recvCq, IbSrqOps srq, IbEvents events);

    /** {@code create_srq}; {@code events} takes the SRQ's asynchronous events (the limit event). */
    IbSrqOps createSrq(int maxWr, int maxSge, IbEvents events);

    /**
     * {@code create_srq} of an {@code IB_SRQT_XRC} SRQ in {@code xrcd} completing to {@code cq}
     * (both this driver's objects, checked live by the core).
     *
     * @since 0.6
     */
    default IbSrqOps createXrcSrq(IbXrcdOps xrcd, IbCqOps cq, int maxWr, int maxSge, IbEvents events) {
        throw new KernelException(Errno.EOPNOTSUPP, "ibv_create_srq_ex: Operation not supported: the driver has no XRC SRQs");
    }

    /** {@code create_ah}: an address vector as {@code attr} gives it (the core checked it against the port; a copy, the driver's to keep). */
    IbAhOps createAh(org.peerdirect.ib.core.verbs.IbvAhAttr attr);

    /** {@code dealloc_pd}: the core checked that nothing uses it. */
    void deallocPd();
}
