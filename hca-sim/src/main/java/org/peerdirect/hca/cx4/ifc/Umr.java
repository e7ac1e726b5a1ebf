package org.peerdirect.hca.cx4.ifc;

/**
 * The UMR work request's segments after the control segment ({@code MLX5_OPCODE_UMR} 0x25,
 * {@code include/linux/mlx5/qp.h}): the 48-byte UMR control segment ({@code struct
 * mlx5_wqe_umr_ctrl_seg}), the 64-byte mkey context segment ({@code struct mlx5_mkey_seg}, the same
 * bytes as the {@code mkc} of {@code CREATE_MKEY}, so {@link Mkey}{@code .MKC_*} read it), then a
 * data segment ({@code lkey}, byte count, address) pointing at the translation list. The control
 * segment's immediate names the mkey to change.
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
}
