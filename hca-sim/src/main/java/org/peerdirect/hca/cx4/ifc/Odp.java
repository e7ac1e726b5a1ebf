package org.peerdirect.hca.cx4.ifc;

/**
 * On-demand paging on the wire: the page-fault EQE ({@code struct mlx5_eqe_page_fault} in the EQE's
 * 28-byte data, {@code include/linux/mlx5/device.h}), {@code PAGE_FAULT_RESUME}'s input
 * ({@code page_fault_resume_in} with {@code trans_page_fault_info}, {@code mlx5_ifc.h}) and the
 * ODP capability block ({@code struct mlx5_ifc_odp_cap_bits}, HCA capability type 2).
 */
public final class Odp {

    private Odp() {
    }

    // ---- page-fault EQE subtypes ({@code MLX5_PFAULT_SUBTYPE_*})
    public static final int SUBTYPE_WQE = 0;
    public static final int SUBTYPE_RDMA = 1;

    // ---- WQE fault types ({@code enum wqe_page_fault_type}), the top byte of pftype_wq
    /** A receive WQE of an SRQ (RMP). */
    public static final int WQE_PF_TYPE_RMP = 0;
    public static final int WQE_PF_TYPE_REQ_SEND_OR_WRITE = 1;
    /** A responder writing a SEND into a receive WQE of the QP's own receive queue. */
    public static final int WQE_PF_TYPE_RESP = 2;
    /** A requester RDMA READ or atomic: it writes its local buffer. */
    public static final int WQE_PF_TYPE_REQ_READ_OR_ATOMIC = 3;

    // ---- {@code enum mlx5_pagefault_flags}: the type's bits as the driver reads them
    public static final int PFAULT_REQUESTOR = 1;
    public static final int PFAULT_WRITE = 1 << 1;
    public static final int PFAULT_RDMA = 1 << 2;

    // ---- the EQE data (offsets from the data's start, EQE byte 0x20)
    /** be32, both subtypes. */
    public static final long EQE_BYTES_COMMITTED = 0x00;
    /** WQE: be16 {@code wqe_index}. */
    public static final long EQE_WQE_INDEX = 0x06;
    /** WQE: be16 {@code packet_length}. */
    public static final long EQE_WQE_PACKET_LENGTH = 0x0a;
    /** WQE: be32 {@code token} (24 bits). */
    public static final long EQE_WQE_TOKEN = 0x0c;
    /** WQE: be32 {@code pftype_wq}: type in bits 31:24, the WQ number in 23:0. */
    public static final long EQE_WQE_PFTYPE_WQ = 0x18;
    /** RDMA: be32 {@code r_key}. */
    public static final long EQE_RDMA_R_KEY = 0x04;
    /** RDMA: be16 {@code packet_length}. */
    public static final long EQE_RDMA_PACKET_LENGTH = 0x0a;
    /** RDMA: be32 {@code rdma_op_len}. */
    public static final long EQE_RDMA_OP_LEN = 0x0c;
    /** RDMA: be64 {@code rdma_va}. */
    public static final long EQE_RDMA_VA = 0x10;
    /** RDMA: be32 {@code pftype_token}: type in bits 31:24, the token in 23:0. */
    public static final long EQE_RDMA_PFTYPE_TOKEN = 0x18;

    // ---- PAGE_FAULT_RESUME (16 bytes): trans_page_fault_info at 0x08
    public static final int RESUME_IN_LEN = 0x10;
    public static final IfcField RESUME_ERROR = new IfcField(0x40, 1);
    public static final IfcField RESUME_PAGE_FAULT_TYPE = new IfcField(0x45, 3);
    public static final IfcField RESUME_WQ_NUMBER = new IfcField(0x48, 24);
    public static final IfcField RESUME_FAULT_TOKEN = new IfcField(0x68, 24);

    // ---- the ODP capability block (at HcaCap.OFFSET of QUERY_HCA_CAP type 2)
    /** {@code rc_odp_caps}, {@code uc_}, {@code ud_}, {@code xrc_}, {@code dc_}: six bits each ({@code odp_per_transport_service_cap_bits}). */
    public static final IfcField RC_ODP_CAPS = new IfcField(0x80, 6);
    public static final IfcField UC_ODP_CAPS = new IfcField(0xa0, 6);
    public static final IfcField UD_ODP_CAPS = new IfcField(0xc0, 6);
    public static final IfcField XRC_ODP_CAPS = new IfcField(0xe0, 6);
    public static final IfcField DC_ODP_CAPS = new IfcField(0x100, 6);
    /** The bits of a per-transport field's value (MSB first in the structure: send is bit 0x80). */
    public static final int CAP_SEND = 1 << 5;
    public static final int CAP_RECEIVE = 1 << 4;
    public static final int CAP_WRITE = 1 << 3;
    public static final int CAP_READ = 1 << 2;
    public static final int CAP_ATOMIC = 1 << 1;
    public static final int CAP_SRQ_RECEIVE = 1;
}
