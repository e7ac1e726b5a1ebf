/**
 * The verbs API, modelled on libibverbs ({@code infiniband/verbs.h}): Java names for the same
 * objects and semantics. A user program (a simulated process) opens a device, allocates a
 * protection domain, registers memory of its address space, creates completion queues and queue
 * pairs, moves them RESET → INIT → RTR → RTS, posts work requests and polls completions.
 *
 * <table>
 * <caption>libibverbs and this package</caption>
 * <tr><th>libibverbs</th><th>here</th></tr>
 * <tr><td>{@code ibv_get_device_list}</td><td>{@link org.peerdirect.ib.core.verbs.IbvDeviceList#devices()}</td></tr>
 * <tr><td>{@code ibv_open_device}</td><td>{@link org.peerdirect.ib.core.verbs.IbvDevice#open}</td></tr>
 * <tr><td>{@code ibv_query_device(_ex)}, {@code ibv_query_port}</td><td>{@link org.peerdirect.ib.core.verbs.IbvContext}</td></tr>
 * <tr><td>{@code ibv_alloc_pd}, {@code ibv_reg_mr}, {@code ibv_reg_mr_ex} ({@link org.peerdirect.ib.core.verbs.IbvMrInitAttr}), {@code ibv_create_qp}, {@code ibv_create_srq}, {@code ibv_create_ah}</td><td>{@link org.peerdirect.ib.core.verbs.IbvPd}</td></tr>
 * <tr><td>{@code ibv_create_cq}, {@code ibv_poll_cq}, {@code ibv_req_notify_cq}</td><td>{@link org.peerdirect.ib.core.verbs.IbvCq}</td></tr>
 * <tr><td>{@code ibv_get_cq_event}, {@code ibv_ack_cq_events}</td><td>{@link org.peerdirect.ib.core.verbs.IbvCompChannel}</td></tr>
 * <tr><td>{@code ibv_modify_qp}, {@code ibv_post_send}, {@code ibv_post_recv}</td><td>{@link org.peerdirect.ib.core.verbs.IbvQp}</td></tr>
 * <tr><td>{@code ibv_modify_srq}, {@code ibv_query_srq}, {@code ibv_post_srq_recv}</td><td>{@link org.peerdirect.ib.core.verbs.IbvSrq}</td></tr>
 * <tr><td>{@code ibv_open_xrcd}, {@code ibv_create_srq_ex}, {@code ibv_create_qp_ex}</td><td>{@link org.peerdirect.ib.core.verbs.IbvContext}; {@code ibv_close_xrcd}: {@link org.peerdirect.ib.core.verbs.IbvXrcd}</td></tr>
 * <tr><td>{@code ibv_get_async_event}</td><td>{@link org.peerdirect.ib.core.verbs.IbvContext#getAsyncEvent}</td></tr>
 * </table>
 *
 * Verbs that fail return an errno in C; here they throw {@code KernelException} with that errno
 * (EINVAL for a bad argument or a QP in the wrong state, ENOMEM, EOPNOTSUPP, EIO once the device
 * is gone). Work requests that fail complete with the status the real stack gives
 * ({@link org.peerdirect.ib.core.verbs.IbvWcStatus}). Work requests and completions are mutable
 * objects meant to be reused: the post and poll paths allocate nothing.
 */
@Export
@Version("0.14.0")
package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
