package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;

/** {@code struct ib_ucontext}'s driver part. */
@ConsumerType
public interface IbUcontextOps {

    /** {@code alloc_pd}. */
    IbPdOps allocPd();

    /**
     * {@code create_cq}: at least {@code cqe} entries. The driver calls {@code events} when an
     * armed CQ gets a completion or when the CQ overruns ({@code comp_handler} / {@code event_handler}).
     */
    IbCqOps createCq(int cqe, IbCqEvents events);

    /** {@code dealloc_ucontext}: called after the core destroyed the context's objects. */
    void deallocUcontext();

    /**
     * A driver-specific method of the context (uverbs' driver methods, {@code UVERBS_METHOD} of a
     * driver's object tree, e.g. {@code mlx5_ib}'s {@code MLX5_IB_METHOD_DEVX_OBJ_CREATE}): the
     * method's name and its attributes are the driver's, so is the result. The core has checked
     * that the context is alive, and an attribute that is a PD of the context (an object handle,
     * {@code UVERBS_ATTR_IDR}) reaches the driver as the driver's {@link IbPdOps} (a PD of another
     * context is ENOENT before the driver is asked). A driver without such methods keeps this
     * default (EOPNOTSUPP).
     *
     * @since 0.8
     */
    default Object driverMethod(String method, Object... attrs) {
        throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EOPNOTSUPP,
                "driver method " + method + ": Operation not supported by this driver");
    }

    /**
     * The first step of the context's close (the user's, or the process's exit): the driver
     * destroys what its own methods made ({@link #driverMethod}: DevX objects, umems, UARs), which
     * may refer to the core's objects (a DPA window to an MR), before the core destroys those.
     *
     * @since 0.8
     */
    default void destroyDriverObjects() {
    }

    /**
     * {@code alloc_xrcd}: a new XRC domain. The domain is the device's, not this context's: a
     * domain shared through a file outlives the context that allocated it, and the driver's
     * {@link #deallocUcontext} must leave it. A driver without XRC keeps this default (the core
     * refuses XRC on a device that does not report {@code IBV_DEVICE_XRC} before asking).
     *
     * @since 0.6
     */
    default IbXrcdOps allocXrcd() {
        throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EOPNOTSUPP,
                "ibv_open_xrcd: Operation not supported: the driver has no alloc_xrcd");
    }

    /**
     * {@code create_qp} of an {@code IB_QPT_XRC_TGT} QP in {@code xrcd} (one this driver
     * allocated): no PD, CQs or queues; its events go to {@code events}.
     *
     * @since 0.6
     */
    default IbQpOps createXrcTgtQp(IbXrcdOps xrcd, IbEvents events) {
        throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EOPNOTSUPP,
                "ibv_create_qp_ex: Operation not supported: the driver has no XRC receive QPs");
    }
}
