package org.peerdirect.hca.cx4.ifc;

/**
 * The UMR work request's segments after the control segment ({@code MLX5_OPCODE_UMR} 0x25,
 * {@code include/linux/mlx5/qp.h}): the 48-byte UMR control segment ({@code struct
 * mlx5_wqe_umr_ctrl_seg}), the 64-byte mkey context segment ({@code struct mlx5_mkey_seg}, the same
 * bytes as the {@code mkc} of {@code CREATE_MKEY}, so {@link Mkey}{@code .MKC_*} read it), then a
 * data segment ({@code lkey}, byte count, address) pointing at the translation list. The control
 * segment's immediate names the mkey to change. The opcode is {@link Wqe#OP_UMR}; the UMR control
 * segment's flag and mkey-mask bits are below.
 */
public final class Umr {

    private Umr() {
    }

    /** Bytes from the WQE start: control segment (16), UMR control segment (48), mkey segment (64), data segment (16). */
    public static final long CTRL_SEG = 0x10;
    public static final long MKEY_SEG = 0x40;
    public static final long DATA_SEG = 0x80;
    /** DS count of a UMR with a translation list ({@code with_data}), and without. */
    public static final int DS_WITH_DATA = 9;
    public static final int DS_NO_DATA = 8;

    // the UMR control segment, offsets inside it
    public static final long FLAGS = 0x00;
    public static final long XLT_OCTOWORDS = 0x04;
    public static final long XLT_OFFSET = 0x06;
    public static final long MKEY_MASK = 0x08;
    public static final long XLT_OFFSET_47_16 = 0x10;

    /** Translation entries of an MTT-mode UMR per 16-byte octoword. */
    public static final int MTT_PER_OCTOWORD = 2;

    // the UMR control segment's flags ({@code MLX5_UMR_*})
    /** {@code xlt_offset} is valid ({@code MLX5_UMR_TRANSLATION_OFFSET_EN}). */
    public static final int FLAG_TRANSLATION_OFFSET_EN = 1 << 4;
    /** The mkey must be in use ({@code MLX5_UMR_CHECK_NOT_FREE}). */
    public static final int FLAG_CHECK_NOT_FREE = 1 << 5;
    /** The mkey must be free ({@code MLX5_UMR_CHECK_FREE}). */
    public static final int FLAG_CHECK_FREE = 2 << 5;
    /** The translations follow inline in the WQE ({@code MLX5_UMR_INLINE}). */
    public static final int FLAG_INLINE = 1 << 7;

    // the UMR control segment's mkey mask: which fields of the mkey segment the UMR changes ({@code MLX5_MKEY_MASK_*})
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
}
