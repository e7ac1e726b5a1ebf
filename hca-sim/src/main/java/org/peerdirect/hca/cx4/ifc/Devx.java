package org.peerdirect.hca.cx4.ifc;

/**
 * DevX layouts ({@code mlx5_ifc.h}): the uid of every command's header, {@code create_uctx_in/out},
 * {@code destroy_uctx_in}, {@code create_umem_in} with its {@code umem} and MTT entries,
 * {@code general_obj_in_cmd_hdr} / {@code _out_cmd_hdr}, and the umem fields of {@code CREATE_CQ},
 * {@code CREATE_QP} and {@code CREATE_MKEY} that put a queue's ring, its doorbell record or an
 * mkey's pages in a umem instead of a {@code pas} list.
 */
public final class Devx {

    private Devx() {
    }

    /** Every command's uid: input dw0 bits 15:0 (0: the kernel's). */
    public static final IfcField UID = new IfcField(0x10, 16);

    /** {@code create_uctx_in.uctx.cap} ({@code MLX5_UCTX_CAP_*}). */
    public static final IfcField CREATE_UCTX_IN_CAP = new IfcField(0x80, 32);
    public static final int CREATE_UCTX_IN_LEN = 0x40;
    /** {@code create_uctx_out.uid}. */
    public static final IfcField CREATE_UCTX_OUT_UID = new IfcField(0x50, 16);
    /** {@code destroy_uctx_in.uid} (the uid to destroy; the header's uid is 0). */
    public static final IfcField DESTROY_UCTX_IN_UID = new IfcField(0x50, 16);

    /** {@code create_umem_in.umem.log_page_size}: pages of {@code 4 KiB << n}. */
    public static final IfcField UMEM_LOG_PAGE_SIZE = new IfcField(0x11b, 5);
    /** {@code umem.page_offset} (be32): where the umem starts in its first page. */
    public static final long UMEM_PAGE_OFFSET = 0x24;
    /** {@code umem.num_of_mtt} (be64). */
    public static final long UMEM_NUM_OF_MTT = 0x28;
    /** {@code umem.mtt[]}: be64 page addresses with {@code rd_en} bit 0, {@code wr_en} bit 1 ({@link Mkey#MTT_READ}, {@link Mkey#MTT_WRITE}). */
    public static final long UMEM_MTT = 0x30;
    /** {@code create_umem_out.umem_id} / {@code destroy_umem_in.umem_id}: {@link Pages#INDEX24}. */
    public static final IfcField UMEM_ID = Pages.INDEX24;

    /** {@code general_obj_in_cmd_hdr}: {@code obj_type} where other commands have {@code op_mod}. */
    public static final IfcField OBJ_TYPE = new IfcField(0x30, 16);
    /** {@code general_obj_in_cmd_hdr.obj_id} / {@code general_obj_out_cmd_hdr.obj_id} (be32). */
    public static final long OBJ_ID = 0x08;
    /** The object's context follows the 16-byte header in the input and in the output. */
    public static final int GENERAL_OBJ_HDR = 0x10;

    /** {@code create_cq_in.cq_umem_offset} (be64), {@code cq_umem_id}, {@code cq_umem_valid}. */
    public static final long CQ_UMEM_OFFSET = 0x50;
    public static final long CQ_UMEM_ID = 0x58;
    public static final IfcField CQ_UMEM_VALID = new IfcField(0x2e0, 1);
    /** {@code cqc.dbr_umem_valid}, {@code cqc.dbr_umem_id} (relative to the CQ context); {@code dbr_addr} is then the offset in the umem. */
    public static final IfcField CQC_DBR_UMEM_VALID = new IfcField(0x06, 1);
    public static final IfcField CQC_DBR_UMEM_ID = new IfcField(0x20, 32);

    /**
     * {@code cqc.apu_cq} (dw0 bit 24): the CQ's element is a DPA unit, named by
     * {@code c_eqn_or_apu_element} ({@link Cq#CQC_C_EQN}), instead of an EQ; {@code apu_element_type}
     * 0 a DPA thread (1 a DPA EQ, 2 an emulated device's EQ: not modelled). The element type's
     * position is not public [model: dw0 bits 1..0].
     */
    public static final IfcField CQC_APU_CQ = new IfcField(0x07, 1);
    public static final IfcField CQC_APU_ELEMENT_TYPE = new IfcField(0x1e, 2);
    public static final int APU_ELEMENT_THREAD = 0;

    /** {@code create_qp_in.wq_umem_offset} (be64), {@code wq_umem_id}, {@code wq_umem_valid}. */
    public static final long QP_WQ_UMEM_OFFSET = 0x100;
    public static final long QP_WQ_UMEM_ID = 0x108;
    public static final IfcField QP_WQ_UMEM_VALID = new IfcField(0x860, 1);
    /** {@code qpc.dbr_umem_valid}, {@code qpc.dbr_umem_id} (relative to the QP context). */
    public static final IfcField QPC_DBR_UMEM_VALID = new IfcField(0x683, 1);
    public static final IfcField QPC_DBR_UMEM_ID = new IfcField(0x720, 32);

    /** {@code create_mkey_in.mkey_umem_valid}, {@code mkey_umem_id}, {@code mkey_umem_offset} (be64). */
    public static final IfcField MKEY_UMEM_VALID = new IfcField(0x61, 1);
    public static final long MKEY_UMEM_ID = 0x64;
    public static final long MKEY_UMEM_OFFSET = 0x68;
}
