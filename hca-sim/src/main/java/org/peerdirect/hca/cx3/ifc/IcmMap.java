package org.peerdirect.hca.cx3.ifc;

/**
 * The input mailbox of {@code MAP_FA}, {@code MAP_ICM_AUX} and {@code MAP_ICM}
 * ({@code mlx4_map_cmd} in {@code icm.c}): up to {@link #MAX_ENTRIES} 16-byte entries, the
 * count in the input modifier; each a be64 ICM virtual address (ignored for the firmware and
 * auxiliary areas) and a be64 bus address with log2(size) - 12 in its low bits.
 * {@code UNMAP_ICM} takes the virtual address as input parameter and the 4 KiB pages as modifier;
 * {@code SET_ICM_SIZE} the ICM size in bytes and answers the auxiliary pages needed.
 */
public final class IcmMap {

    public static final int ENTRY_SIZE = 16;
    public static final int VIRT = 0x00;
    public static final int PHYS = 0x08;
    public static final int MAX_ENTRIES = Mlx4Cmd.MAILBOX_SIZE / ENTRY_SIZE;
    /** {@code MLX4_ICM_PAGE_SHIFT}. */
    public static final int ICM_PAGE_SHIFT = 12;
    public static final int ICM_PAGE_SIZE = 1 << ICM_PAGE_SHIFT;

    private IcmMap() {
    }
}
