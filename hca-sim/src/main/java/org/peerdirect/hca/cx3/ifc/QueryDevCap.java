package org.peerdirect.hca.cx3.ifc;

/**
 * The output mailbox of {@code QUERY_DEV_CAP} ({@code mlx4_QUERY_DEV_CAP} in {@code fw.c}): the
 * device's limits, most as log2 in one byte, and the context entry sizes the driver lays ICM out
 * with. Only the fields the model fills are named.
 */
public final class QueryDevCap {

    /** u8 log2: WQEs of an SRQ / of a QP's queue. */
    public static final int MAX_SRQ_SZ = 0x10;
    public static final int MAX_QP_SZ = 0x11;
    /** u8: log2 reserved QPs (low nibble), log2 QPs (low 5 bits). */
    public static final int RSVD_QP = 0x12;
    public static final int MAX_QP = 0x13;
    /** u8: log2 reserved SRQs (high nibble), log2 SRQs. */
    public static final int RSVD_SRQ = 0x14;
    public static final int MAX_SRQ = 0x15;
    /** u8 log2: CQEs of a CQ; reserved CQs (low nibble); CQs. */
    public static final int MAX_CQ_SZ = 0x19;
    public static final int RSVD_CQ = 0x1a;
    public static final int MAX_CQ = 0x1b;
    /** u8 log2: MPT entries. */
    public static final int MAX_MPT = 0x1d;
    /** u8: log2 reserved EQs (low nibble), log2 EQs (low nibble). */
    public static final int RSVD_EQ = 0x1e;
    public static final int MAX_EQ = 0x1f;
    /** u8: log2 reserved MTT entries (high nibble). */
    public static final int RSVD_MTT = 0x20;
    /** u8 log2: the largest region an MPT may describe. */
    public static final int MAX_MRW_SZ = 0x21;
    /** u8: log2 reserved MPTs (low nibble). */
    public static final int RSVD_MRW = 0x22;
    /** u8 log2: outstanding RDMA reads/atomics as requester / responder per QP. */
    public static final int MAX_REQ_QP = 0x29;
    public static final int MAX_RES_QP = 0x2b;
    /** u8: ports (low nibble). */
    public static final int VL_PORT = 0x3b;
    /** u8: reserved UARs (high nibble); log2 UAR BAR size in MiB (low 6 bits); log2 page size. */
    public static final int RSVD_UAR = 0x48;
    public static final int UAR_SZ = 0x49;
    public static final int PAGE_SZ = 0x4b;
    /** u8: BlueFlame available (bit 7); log2 BlueFlame register size; log2 registers per page. */
    public static final int BF = 0x4c;
    public static final int LOG_BF_REG_SZ = 0x4d;
    public static final int LOG_MAX_BF_REGS_PER_PAGE = 0x4e;
    /** u8 / be16: scatter entries and descriptor bytes of a send and of a receive WQE. */
    public static final int MAX_SG_SQ = 0x51;
    public static final int MAX_DESC_SZ_SQ = 0x52;
    public static final int MAX_SG_RQ = 0x55;
    public static final int MAX_DESC_SZ_RQ = 0x56;
    /** u8: reserved PDs (high nibble); log2 PDs (low 6 bits). */
    public static final int RSVD_PD = 0x64;
    public static final int MAX_PD = 0x65;
    /** be16 each: context entry sizes. */
    public static final int QPC_ENTRY_SZ = 0x82;
    public static final int EQC_ENTRY_SZ = 0x88;
    public static final int CQC_ENTRY_SZ = 0x8a;
    public static final int SRQ_ENTRY_SZ = 0x8c;
    public static final int MTT_ENTRY_SZ = 0x90;
    public static final int D_MPT_ENTRY_SZ = 0x92;
    /** be32: the reserved L_Key. */
    public static final int RSVD_LKEY = 0x98;
    /** be64: the largest ICM the device maps. */
    public static final int MAX_ICM_SZ = 0xa0;
    public static final int OUT_SIZE = 0x100;

    private QueryDevCap() {
    }
}
