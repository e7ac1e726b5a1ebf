package org.peerdirect.hca.cx4.ifc;

/**
 * The initialization segment at the start of BAR0 ({@code struct mlx5_init_seg}), big-endian,
 * accessed as 32-bit words ({@code ioread32be}/{@code iowrite32be}).
 */
public final class InitSeg {

    private InitSeg() {
    }

    /** bits 31:16 firmware minor, 15:0 firmware major. */
    public static final long FW_REV = 0x000;
    /** bits 31:16 command interface revision, 15:0 firmware subminor. */
    public static final long CMDIF_REV_FW_SUB = 0x004;
    /** Command queue physical address bits 63:32. */
    public static final long CMDQ_ADDR_H = 0x010;
    /**
     * Write: command queue address bits 31:12. Read: bits 9:8 {@code nic_interface}, 7:4
     * {@code log_cmdq_size}, 3:0 {@code log_cmdq_stride}.
     */
    public static final long CMDQ_ADDR_L_SZ = 0x014;
    /** Command doorbell vector: writing {@code 1 << slot} hands the slot to firmware. */
    public static final long CMD_DBELL = 0x018;
    /** bit 31: initializing (firmware not ready while set). */
    public static final long INITIALIZING = 0x1fc;
    /** The 64-byte health buffer. */
    public static final long HEALTH = 0x200;
    /** {@code health.fw_ver} (a read of all ones: the device is gone). */
    public static final long HEALTH_FW_VER = HEALTH + 0x30;
    /** {@code health.synd} (byte). */
    public static final long HEALTH_SYND = HEALTH + 0x3d;
    /** bits 23:0 the health counter (advances while firmware lives), 31:24 health syndrome. */
    public static final long HEALTH_COUNTER = 0x1010;

    /** The command interface revision the driver requires ({@code CMD_IF_REV}). */
    public static final int CMD_IF_REV = 5;
    public static final int INITIALIZING_BIT = 1 << 31;
    /** {@code nic_interface} values ({@code MLX5_NIC_IFC_*}), bits 9:8 of {@link #CMDQ_ADDR_L_SZ}. */
    public static final int NIC_IFC_FULL = 0;
    public static final int NIC_IFC_DISABLED = 1;
    public static final int NIC_IFC_SW_RESET = 7;
}
