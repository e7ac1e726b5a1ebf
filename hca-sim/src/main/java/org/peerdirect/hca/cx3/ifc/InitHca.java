package org.peerdirect.hca.cx3.ifc;

/**
 * The input mailbox of {@code INIT_HCA} ({@code mlx4_INIT_HCA}): where each context table starts
 * in ICM and how many entries it has. A base is a be64 ICM address; the log2 size shares the
 * base's lowest byte (the bases are aligned), as the kernel puts them.
 */
public final class InitHca {

    /** u8: the layout version (2). */
    public static final int VERSION = 0x00;
    public static final int VERSION_2 = 2;
    public static final int CACHELINE_SZ = 0x0e;
    public static final int FLAGS = 0x14;
    public static final int QPC_BASE = 0x30;
    public static final int LOG_NUM_QPS = 0x37;
    public static final int SRQC_BASE = 0x48;
    public static final int LOG_NUM_SRQS = 0x4f;
    public static final int CQC_BASE = 0x50;
    public static final int LOG_NUM_CQS = 0x57;
    public static final int EQC_BASE = 0x80;
    public static final int LOG_NUM_EQS = 0x87;
    public static final int DMPT_BASE = 0xf0;
    public static final int LOG_MPT_SZ = 0xfb;
    public static final int MTT_BASE = 0x100;
    public static final int CMPT_BASE = 0x108;
    /** u8: log2 of the UAR page size minus 12; log2 of the UAR area in MiB. */
    public static final int UAR_PAGE_SZ = 0x12a;
    public static final int LOG_UAR_SZ = 0x12b;
    public static final int IN_SIZE = 0x200;

    private InitHca() {
    }
}
