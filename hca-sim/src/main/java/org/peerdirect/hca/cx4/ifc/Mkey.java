package org.peerdirect.hca.cx4.ifc;

/**
 * Memory keys: {@code CREATE_MKEY}/{@code DESTROY_MKEY} with the mkey context ({@code struct
 * mlx5_ifc_mkc_bits}) and its MTT list, and the key layout {@code mkey_index << 8 | key byte}
 * ({@code mlx5_idx_to_mkey}).
 */
public final class Mkey {

    private Mkey() {
    }

    public static final long CREATE_IN_MKC = 0x10;
    public static final long CREATE_IN_OCTWORD_ACTUAL_SIZE = 0x60;
    public static final long CREATE_IN_MTT = 0x110;
    public static final IfcField MKC_FREE = new IfcField(0x01, 1);
    public static final IfcField MKC_ACCESS_MODE_4_2 = new IfcField(0x03, 3);
    /**
     * Model-only ({@code reserved_at_6}): the key admits RDMA FLUSH with the global / persistent
     * placement type ({@code IB_ACCESS_FLUSH_*}). Set by CREATE_MKEY only: no UMR mask bit changes
     * them, so mlx5_ib counts them among the access flags UMR cannot change.
     */
    public static final IfcField MKC_FLUSH_GLOBAL = new IfcField(0x06, 1);
    public static final IfcField MKC_FLUSH_PERSISTENT = new IfcField(0x07, 1);
    public static final IfcField MKC_UMR_EN = new IfcField(0x10, 1);
    public static final IfcField MKC_A = new IfcField(0x11, 1);
    public static final IfcField MKC_RW = new IfcField(0x12, 1);
    public static final IfcField MKC_RR = new IfcField(0x13, 1);
    public static final IfcField MKC_LW = new IfcField(0x14, 1);
    public static final IfcField MKC_LR = new IfcField(0x15, 1);
    public static final IfcField MKC_ACCESS_MODE_1_0 = new IfcField(0x16, 2);
    public static final IfcField MKC_QPN = new IfcField(0x20, 24);
    public static final IfcField MKC_MKEY_7_0 = new IfcField(0x38, 8);
    public static final IfcField MKC_LENGTH64 = new IfcField(0x60, 1);
    public static final IfcField MKC_PD = new IfcField(0x68, 24);
    public static final long MKC_START_ADDR = 0x10;
    public static final long MKC_LEN = 0x18;
    public static final IfcField MKC_TRANSLATIONS_OCTWORD_SIZE = new IfcField(0x1a0, 32);
    public static final IfcField MKC_LOG_PAGE_SIZE = new IfcField(0x1da, 6);

    /** {@code QUERY_SPECIAL_CONTEXTS} output ({@code mlx5_ifc_query_special_contexts_out_bits}): 32 bytes. */
    public static final int SPECIAL_CONTEXTS_OUT_LEN = 0x20;
    public static final long SPECIAL_OUT_DUMP_FILL_MKEY = 0x08;
    public static final long SPECIAL_OUT_RESD_LKEY = 0x0c;
    public static final long SPECIAL_OUT_NULL_MKEY = 0x10;
    /** A KSM entry ({@code struct mlx5_ksm}): be32 reserved, be32 key, be64 va; 16 bytes, one octoword. */
    public static final int KSM_SIZE = 16;
    public static final long KSM_KEY = 4;
    public static final long KSM_VA = 8;

    public static final int ACCESS_MODE_PA = 0;
    public static final int ACCESS_MODE_MTT = 1;
    public static final int ACCESS_MODE_KLM = 2;
    public static final int ACCESS_MODE_KSM = 3;
    /** MTT entry: big-endian address bits 63:12 for 4 KiB pages, bit 1 write enable, bit 0 read enable ({@code MLX5_IB_MTT_PRESENT} = 3). */
    public static final long MTT_READ = 1;
    public static final long MTT_WRITE = 2;

    /** {@code mlx5_idx_to_mkey}. */
    public static int idxToMkey(int index) {
        return index << 8;
    }

    /** {@code mlx5_mkey_to_idx}. */
    public static int mkeyToIdx(int mkey) {
        return mkey >>> 8;
    }
}
