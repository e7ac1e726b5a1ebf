/**
 * The HCA transport engine: what the silicon of an RDMA NIC does, shared by the ConnectX-3 and
 * ConnectX-4+ personalities, and private to {@code hca-sim}: drivers see only the layout packages
 * ({@code cx3.ifc}, {@code cx4.ifc}), labs and tests {@link org.peerdirect.hca.boards}. It speaks hardware only: MPT entries (keys, PD numbers,
 * {@code mlx4_perm} access bits, MTT translations to IOVAs), QP contexts with their state codes and
 * transition commands, WQE slots with hardware opcodes (filled by each personality's decoder from
 * the WQE bytes it fetched by DMA), CQEs with syndromes, command statuses.
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
 * <p>Both personalities put the engine behind what the silicon shows its driver: commands in BAR0
 * (the ConnectX-3's HCR, the ConnectX-4's command queue), WQEs, CQEs and EQEs as bytes in host
 * memory read and written by DMA, doorbells as BAR writes (UAR, BlueFlame), events as EQEs and
 * MSI-X. The engine's own slots and method calls are the inside of the chip.
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
package org.peerdirect.hca.engine;
