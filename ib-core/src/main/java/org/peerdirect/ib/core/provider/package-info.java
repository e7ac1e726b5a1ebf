/**
 * The provider SPI: what an RDMA driver implements so that the IB core can put a device in front
 * of users ({@code struct ib_device_ops} of {@code include/rdma/ib_verbs.h}, with the user-space
 * half of rdma-core's {@code struct verbs_context_ops} for the data path). A driver publishes one
 * {@link org.peerdirect.ib.core.provider.IbDeviceOps} service per device it drives
 * ({@code ib_register_device}); the core publishes the user-facing
 * {@link org.peerdirect.ib.core.verbs.IbvDevice} for it and takes it away again when the service
 * goes ({@code ib_unregister_device}).
 *
 * <table>
 * <caption>ib_device_ops / verbs_context_ops and this package</caption>
 * <tr><th>C</th><th>here</th></tr>
 * <tr><td>{@code query_device}, {@code query_port}, {@code query_gid}, {@code alloc_ucontext}, {@code process_mad} (PMA counters), {@code get_hw_stats}, {@code get_netdev}</td><td>{@link org.peerdirect.ib.core.provider.IbDeviceOps}</td></tr>
 * <tr><td>{@code alloc_xrcd}, XRC target {@code create_qp}</td><td>{@link org.peerdirect.ib.core.provider.IbUcontextOps}; {@code dealloc_xrcd}: {@link org.peerdirect.ib.core.provider.IbXrcdOps}</td></tr>
 * <tr><td>{@code alloc_pd}, {@code create_cq}, {@code dealloc_ucontext}</td><td>{@link org.peerdirect.ib.core.provider.IbUcontextOps}</td></tr>
 * <tr><td>{@code reg_user_mr}, {@code create_qp}, {@code create_srq}, {@code create_ah}, {@code dealloc_pd}</td><td>{@link org.peerdirect.ib.core.provider.IbPdOps}</td></tr>
 * <tr><td>{@code dereg_mr}</td><td>{@link org.peerdirect.ib.core.provider.IbMrOps}</td></tr>
 * <tr><td>{@code poll_cq}, {@code req_notify_cq}, {@code destroy_cq}</td><td>{@link org.peerdirect.ib.core.provider.IbCqOps}</td></tr>
 * <tr><td>{@code modify_qp}, {@code query_qp}, {@code post_send}, {@code post_recv}, {@code destroy_qp}</td><td>{@link org.peerdirect.ib.core.provider.IbQpOps}</td></tr>
 * <tr><td>{@code post_srq_recv}, {@code modify_srq}, {@code query_srq}, {@code destroy_srq}</td><td>{@link org.peerdirect.ib.core.provider.IbSrqOps}</td></tr>
 * <tr><td>{@code destroy_ah}</td><td>{@link org.peerdirect.ib.core.provider.IbAhOps}</td></tr>
 * <tr><td>{@code ib_cq->comp_handler}, {@code event_handler}</td><td>{@link org.peerdirect.ib.core.provider.IbCqEvents}</td></tr>
 * <tr><td>{@code ib_qp->event_handler}, {@code ib_srq->event_handler}</td><td>{@link org.peerdirect.ib.core.provider.IbEvents}</td></tr>
 * <tr><td>{@code ib_dispatch_event} (port events)</td><td>{@link org.peerdirect.ib.core.provider.IbDeviceEvents}</td></tr>
 * </table>
 *
 * <h2>What the core does for every driver</h2>
 * Access-flag checks ({@code ib_check_mr_access}) and capability checks against the device's
 * attributes (an on-demand MR on a device without ODP is EOPNOTSUPP before the driver is asked),
 * QP state transitions ({@code ib_modify_qp_is_ok} with the required attribute masks) and the IB
 * ranges of QP attributes, use counts (EBUSY when a PD, CQ or SRQ is destroyed while in use),
 * objects belonging to the right context, completion channels and their events, asynchronous
 * events queued for the owning context ({@code DEVICE_FATAL} to every context on disassociation), closing a
 * context (destroying what its user left), cleanup when a process exits, and disassociation when
 * the device goes (every later verb EIO, channel waiters woken, MRs deregistered so their memory
 * returns, QPs moved to the error state).
 *
 * <h2>What a driver must do</h2>
 * Program its hardware; build WQEs and translate CQEs on the data path (the post and poll methods
 * are called with no lock and must not allocate); register user memory through
 * {@link org.peerdirect.ib.core.umem.UmemService} and, for peer memory, revoke the hardware key
 * before the umem's invalidation function returns; throw
 * {@link org.peerdirect.kernel.mm.KernelException} with the errno for refused commands. On
 * removal, unregister the {@code IbDeviceOps} service first (the core disassociates: it
 * deregisters every MR through {@link org.peerdirect.ib.core.provider.IbMrOps#deregMr}), then tear
 * the hardware down; objects the users still hold are destroyed later through the same methods,
 * which must then succeed quietly.
 */
@Export
@Version("0.10.0")
package org.peerdirect.ib.core.provider;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
