package org.peerdirect.hca.engine;

/**
 * A page-fault event ({@code struct mlx5_eqe_page_fault} as {@code mlx5_pagefault} parses it; EQE
 * type {@code PAGE_FAULT = 0x0C}): the device met a page of an on-demand mkey without the right it
 * needed and stopped that work until the driver answers with {@link HcaDevice#pageFaultResume}.
 *
 * <ul>
 * <li>{@link #SUBTYPE_WQE}: a requester (the send queue's WQE {@code wqeIndex}) or a responder
 * writing a SEND into a receive WQE ({@code wqeIndex} of the receive queue, or of the SRQ when
 * {@code wqNum} names one: {@link #FLAG_SRQ}). The driver reads that WQE from the queue and faults its
 * data segments in, as {@code mlx5_ib_mr_wqe_pfault_handler} does; {@code key}, {@code va} and
 * {@code length} name the first missing page's segment as a convenience.</li>
 * <li>{@link #SUBTYPE_RDMA}: a responder RDMA WRITE, READ or atomic: {@code key} is the rkey,
 * {@code va} and {@code length} the range still to transfer ({@code mlx5_ib_mr_rdma_pfault_handler}).
 * The requester meanwhile receives RNR NAKs and retries by its RNR timer.</li>
 * </ul>
 *
 * @param token identifies the fault to {@link HcaDevice#pageFaultResume}
 * @param subtype {@link #SUBTYPE_WQE} or {@link #SUBTYPE_RDMA}
 * @param flags {@link #FLAG_REQUESTOR}, {@link #FLAG_WRITE}, {@link #FLAG_RDMA} ({@code enum mlx5_pagefault_flags}),
 *        {@link #FLAG_SRQ}
 * @param wqNum the QP number, or the SRQ number with {@link #FLAG_SRQ}
 * @param wqeIndex the WQE (WQE subtype), otherwise -1
 * @param key the lkey or rkey of the missing page's segment
 * @param va the first missing address
 * @param length bytes of the segment from {@code va}
 */
public record PageFault(int token, int subtype, int flags, int wqNum, long wqeIndex, int key, long va, long length) {

    /** {@code MLX5_PFAULT_SUBTYPE_WQE}. */
    public static final int SUBTYPE_WQE = 0;
    /** {@code MLX5_PFAULT_SUBTYPE_RDMA}. */
    public static final int SUBTYPE_RDMA = 1;
    /** {@code MLX5_PFAULT_REQUESTOR}: the send queue faulted (else a responder). */
    public static final int FLAG_REQUESTOR = 1;
    /** {@code MLX5_PFAULT_WRITE}: the access writes the page (it needs the MTT write bit). */
    public static final int FLAG_WRITE = 1 << 1;
    /** {@code MLX5_PFAULT_RDMA}: an RDMA or atomic access by a remote requester. */
    public static final int FLAG_RDMA = 1 << 2;
    /** The WQ is an SRQ ({@code wq_num} is an SRQ number; mlx5 tells it by the resource type). */
    public static final int FLAG_SRQ = 1 << 8;

    public boolean requestor() {
        return (flags & FLAG_REQUESTOR) != 0;
    }

    public boolean write() {
        return (flags & FLAG_WRITE) != 0;
    }
}
