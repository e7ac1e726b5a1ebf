package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.kernel.mm.AddressSpace;

/** {@code struct ibv_context}: an open device in one process. */
@ProviderType
public interface IbvContext extends AutoCloseable {

    IbvDevice device();

    AddressSpace process();

    /** {@code ibv_query_device}. */
    IbvDeviceAttr queryDevice();

    /** {@code ibv_query_device_ex}: the same attributes; {@code odpCaps()} is the extended part. */
    IbvDeviceAttr queryDeviceEx();

    /** {@code ibv_query_port} (ports are numbered from 1). */
    IbvPortAttr queryPort(int port);

    /** {@code ibv_query_gid}: the GID as text, e.g. {@code fe80:0000:0000:0000:0002:c903:0000:0001}. */
    String queryGid(int port, int index);

    /** {@code ibv_alloc_pd}. */
    IbvPd allocPd();

    /** {@code ibv_create_comp_channel}. */
    IbvCompChannel createCompChannel();

    /** {@code ibv_create_cq}: at least {@code cqe} entries; events go to {@code channel} (may be null). */
    IbvCq createCq(int cqe, IbvCompChannel channel);

    /**
     * {@code ibv_open_xrcd}: with {@code fd} -1 a new XRC domain of this context; with a file
     * descriptor of the process, the domain of that file on this device, shared by every process
     * that opens it: found, or created when {@code oflags} has {@link IbvXrcd#O_CREAT} (else
     * EAGAIN); {@link IbvXrcd#O_EXCL} with a domain already there: EINVAL. EBADF for a descriptor
     * that is not open, EOPNOTSUPP on a device without {@link IbvDeviceAttr#DEVICE_XRC}.
     *
     * @since 0.10
     */
    IbvXrcd openXrcd(int fd, int oflags);

    /**
     * A driver-specific method ({@code ioctl} on the uverbs file with a driver's method id, what
     * rdma-core's provider libraries use for their direct-verbs calls, e.g. libmlx5's
     * {@code mlx5dv_devx_obj_create}): the method's name and attributes are the driver's. A
     * provider's user library calls it, not applications. EOPNOTSUPP when the driver has no such
     * method; EINVAL on a closed context, EIO once the device is gone.
     *
     * @since 0.13
     */
    default Object driverMethod(String method, Object... attrs) {
        throw new org.peerdirect.kernel.mm.KernelException(org.peerdirect.kernel.mm.KernelException.Errno.EOPNOTSUPP,
                "driver method " + method + ": Operation not supported");
    }

    /**
     * {@code ibv_create_srq_ex}: a basic SRQ (as {@link IbvPd#createSrq}) or, with
     * {@link IbvSrqInitAttrEx.SrqType#XRC}, an XRC SRQ of {@code xrcd} whose receives complete to
     * {@code cq}; the PD is the one the messages it receives are checked against.
     *
     * @since 0.10
     */
    IbvSrq createSrqEx(IbvSrqInitAttrEx attr);

    /**
     * {@code ibv_create_qp_ex}: {@link IbvQpInitAttr#pd} for every type (as
     * {@link IbvPd#createQp}), or, for {@link IbvQpType#XRC_RECV}, {@link IbvQpInitAttr#xrcd} and
     * nothing else (CQs, SRQ and caps are not read).
     *
     * @since 0.10
     */
    IbvQp createQpEx(IbvQpInitAttr attr);

    /**
     * {@code ibv_open_qp}: a handle of this context on an XRC receive QP that exists in
     * {@link IbvQpOpenAttr#xrcd} (created by any context, usually another process's, that shares
     * the domain through a file). The QP is one: every handle modifies and queries it, and its
     * asynchronous events reach every handle's context; it lives until its last handle is
     * destroyed ({@link IbvQp#destroy} of a handle closes it), so a receiving process keeps it
     * when its creator exits. EINVAL for another type than {@link IbvQpType#XRC_RECV}, a domain
     * not opened by this context, or a number that names no XRC receive QP of the domain.
     *
     * @since 0.11
     */
    IbvQp openQp(IbvQpOpenAttr attr);

    /**
     * {@code ibv_get_async_event}, bounded: the oldest event of this context not yet returned, or
     * null when none came within {@code timeout}. Events of the context's QPs, CQs and SRQs, of
     * the device's ports, and {@link IbvEventType#DEVICE_FATAL} when the device goes; after that,
     * once the queue is empty, EIO. EINVAL once the context is closed.
     *
     * <p>There is no {@code ibv_ack_async_event}: C needs it so that a destroy waits until no
     * event points at the object; here an event holds the object itself, which stays valid to
     * read after it is destroyed.
     */
    IbvAsyncEvent getAsyncEvent(long timeout, java.util.concurrent.TimeUnit unit) throws InterruptedException;

    /** {@code ibv_close_device}: destroys what is left of the context. */
    @Override
    void close();
}
