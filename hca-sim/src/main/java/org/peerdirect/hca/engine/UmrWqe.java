package org.peerdirect.hca.engine;

/**
 * A UMR work request ({@code MLX5_OPCODE_UMR} on a QP of service type REG_UMR) as the send-queue
 * fetch decoded it: the target mkey (the control segment's immediate), the UMR control segment's
 * flags and mkey mask, the mkey context segment's new values, and where the translations are
 * (a data segment with the reserved lkey 0 and a bus address, as {@code mlx5r_umr_post_send}
 * builds it). The bit values are the hardware's ({@code MLX5_UMR_*}, {@code MLX5_MKEY_MASK_*} of
 * {@code include/linux/mlx5/qp.h}; the driver-facing copy is {@code org.peerdirect.hca.cx4.ifc.Umr},
 * checked equal by the model's {@code IfcVocabularyTest}). One per send slot of a REG_UMR QP, reused.
 */
public final class UmrWqe {

    /** Control flags: {@code xlt_offset} is valid ({@code MLX5_UMR_TRANSLATION_OFFSET_EN}). */
    public static final int FLAG_TRANSLATION_OFFSET_EN = 1 << 4;
    /** The mkey must be in use ({@code MLX5_UMR_CHECK_NOT_FREE}). */
    public static final int FLAG_CHECK_NOT_FREE = 1 << 5;
    /** The mkey must be free ({@code MLX5_UMR_CHECK_FREE}). */
    public static final int FLAG_CHECK_FREE = 2 << 5;
    static final int CHECK_MASK = 3 << 5;
    /** The translations follow inline in the WQE ({@code MLX5_UMR_INLINE}). */
    public static final int FLAG_INLINE = 1 << 7;

    public static final long MASK_LEN = 1L;
    public static final long MASK_PAGE_SIZE = 1L << 1;
    public static final long MASK_START_ADDR = 1L << 6;
    public static final long MASK_PD = 1L << 7;
    public static final long MASK_KEY = 1L << 13;
    public static final long MASK_QPN = 1L << 14;
    public static final long MASK_LR = 1L << 17;
    public static final long MASK_LW = 1L << 18;
    public static final long MASK_RR = 1L << 19;
    public static final long MASK_RW = 1L << 20;
    public static final long MASK_A = 1L << 21;
    public static final long MASK_FREE = 1L << 29;

    /** The mkey to change (the control segment's immediate). */
    public int mkey;
    public int flags;
    public long mask;
    // the mkey context segment
    public boolean free;
    /** {@link HcaDevice}{@code .PERM_*} of the segment's access bits. */
    public int perm;
    public int keyByte;
    public int pdn;
    public long start;
    public long length;
    public boolean length64;
    public int logPageSize;
    // the translations
    /** MTT entries to write (two per octoword of {@code xlt_octowords}); 0: none. */
    public int xltEntries;
    /** The first MTT entry written ({@code xlt_offset} × 2; 0 without the offset flag). */
    public long xltOffset;
    /** The data segment: lkey (must be the reserved lkey 0), byte count and bus address of the list. */
    public int xltLkey;
    public long xltByteCount;
    public long xltIova;
}
