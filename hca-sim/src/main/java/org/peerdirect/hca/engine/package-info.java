/**
 * The HCA transport engine: what the silicon of an RDMA NIC does, shared by the ConnectX-3 and
 * (later) ConnectX-4+ personalities. It speaks hardware only: MPT entries (keys, PD numbers,
 * {@code mlx4_perm} access bits, MTT translations to IOVAs), QP contexts with their state codes and
 * transition commands, WQE slots with hardware opcodes, CQEs with syndromes, command statuses.
 * It imports nothing of the IB core or the peer-memory API.
 *
 * <p>Split as rxe splits its files: {@link org.peerdirect.hca.engine.HwQp} (QP context and state
 * machine, {@code rxe_qp.c}), {@code Requester} ({@code rxe_req.c} with the completer of
 * {@code rxe_comp.c}), {@code Responder} ({@code rxe_resp.c}), {@code DmaMover} ({@code copy_data}),
 * {@link org.peerdirect.hca.engine.HwCq} (the CQ writer, {@code rxe_cq.c}), {@code Scheduler} (the
 * retransmit and RNR timers); {@link org.peerdirect.hca.engine.HcaPort} routes over the
 * {@link org.peerdirect.hca.boards.Fabric} (the subnet linking ports of devices in one JVM), and
 * {@link org.peerdirect.hca.engine.HcaView} is what a lab sees of the silicon. Every byte moves
 * through the devices' IOMMU domains.
 *
 * <p>Simplifications, stated: WQEs and CQEs are preallocated slots with the hardware fields rather
 * than bytes in host memory read and written by DMA, doorbells are method calls rather than BAR
 * writes, and CQ events reach the driver through a {@link org.peerdirect.hca.engine.CqEventHandler}
 * rather than an EQ and MSI-X (the ConnectX-3 personality's documented firmware shortcut); the
 * ConnectX-4+ personality will put the same engine behind descriptors in memory, BAR doorbells and
 * MSI-X.
 *
 * <p>On-demand paging, the ConnectX-4+ seam: an on-demand mkey ({@code sw2hwMptOnDemand}) starts
 * with no translation; the driver writes and zaps its MTT entries by UMR ({@code umrUpdate},
 * {@code umrZap}, which returns when no DMA through the zapped pages is in flight). A translation
 * miss is a {@link org.peerdirect.hca.engine.PageFault} event, not an error: a requester-side miss
 * stalls the send queue until {@code PAGE_FAULT_RESUME}; a responder-side miss answers RNR NAKs
 * (the requester backs off by the RNR timer) and keeps the receive WQE of a SEND unconsumed; an
 * atomic executed before its response met a miss is replayed from the responder's saved result,
 * not executed twice. The fabric is lossless, so transport retries happen only when the destination is
 * unreachable (its device removed, its QP not ready) or the PSNs disagree.
 */
@Export
@Version("0.8.0")
package org.peerdirect.hca.engine;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;
