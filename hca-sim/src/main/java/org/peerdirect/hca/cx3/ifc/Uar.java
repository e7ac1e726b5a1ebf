package org.peerdirect.hca.cx3.ifc;

/**
 * The UAR pages in BAR2 ({@code mlx4_uar_alloc}, {@code eq.c}, {@code doorbell.h}), 4 KiB each:
 * the EQ doorbells (four per page: EQ {@code n} on page {@code n / 4} at
 * {@link #EQ_DOORBELL} + 8 × ({@code n % 4}), be32 {@code ci | req_not << 31}), the CQ doorbell
 * and the send doorbell.
 */
public final class Uar {

    public static final int PAGE_SIZE = 4096;
    public static final int EQ_DOORBELL = 0x800;
    public static final int EQ_REQ_NOT = 1 << 31;
    /** {@code MLX4_CQ_DOORBELL}: two be32, {@code sn << 28 | cmd | cqn} then the consumer index. */
    public static final int CQ_DOORBELL = 0x20;
    /** {@code MLX4_SEND_DOORBELL}: be32 {@code qpn << 8}. */
    public static final int SEND_DOORBELL = 0x14;
    public static final int CQ_DB_REQ_NOT_SOL = 1 << 24;
    public static final int CQ_DB_REQ_NOT = 2 << 24;
    /**
     * Where the BlueFlame pages start in BAR2: after the UAR pages ({@code num_uars << PAGE_SHIFT},
     * {@code mlx4_init_hca}'s {@code bf_start}); UAR page {@code n}'s BlueFlame page is the
     * {@code n}th from here ({@link #blueFlame}).
     */
    public static final long BF_BASE = 4L << 20;
    /**
     * The BlueFlame register's size ({@code 1 << log_bf_reg_size} of QUERY_DEV_CAP): libmlx4 uses
     * the first register of its page in two halves ({@code bf_buf_size}, alternating
     * {@code bf_offset}).
     */
    public static final int BF_REG_SIZE = 512;

    private Uar() {
    }

    /** BAR2 offset of the BlueFlame page of UAR page {@code uar}. */
    public static long blueFlame(int uar) {
        return BF_BASE + (long) uar * PAGE_SIZE;
    }

    /** BAR2 offset of EQ {@code eqn}'s doorbell. */
    public static long eqDoorbell(int eqn) {
        return (long) (eqn / 4) * PAGE_SIZE + EQ_DOORBELL + 8L * (eqn % 4);
    }
}
