package org.peerdirect.hca.cx3.ifc;

/**
 * {@code struct mlx4_mpt_entry} (64 bytes), the input of {@code SW2HW_MPT} (input modifier: the
 * MPT index) and output of {@code QUERY_MPT}; {@code HW2SW_MPT} takes the index (op_mod 1: no
 * output mailbox). A key is {@code index << 8 | key byte}; the entry holds it as the hardware
 * index ({@link #keyToHwIndex}).
 */
public final class MptEntry {

    public static final int SIZE = 64;
    /** be32: flags and access rights. */
    public static final int FLAGS = 0x00;
    public static final int QPN = 0x04;
    /** be32: {@code key_to_hw_index(key)}. */
    public static final int KEY = 0x08;
    /** be32: the PD (low 24 bits) and flags. */
    public static final int PD_FLAGS = 0x0c;
    /** be64. */
    public static final int START = 0x10;
    public static final int LENGTH = 0x18;
    public static final int LKEY = 0x20;
    /** be64: the MTT's byte address. */
    public static final int MTT_ADDR = 0x2c;
    public static final int MTT_SZ = 0x34;
    /** be32: log2 of the MTT's page size. */
    public static final int ENTITY_SIZE = 0x38;
    public static final int FIRST_BYTE_OFFSET = 0x3c;

    /** {@code MLX4_MPT_FLAG_SW_OWNS}: the status nibble, 0xf while software owns the entry (QUERY_MPT). */
    public static final int FLAG_SW_OWNS = 0xf << 28;
    public static final int FLAG_MIO = 1 << 17;
    public static final int FLAG_BIND_ENABLE = 1 << 15;
    public static final int FLAG_PHYSICAL = 1 << 9;
    public static final int FLAG_REGION = 1 << 8;
    /** {@code MLX4_PERM_*}. */
    public static final int PERM_LOCAL_READ = 1 << 10;
    public static final int PERM_LOCAL_WRITE = 1 << 11;
    public static final int PERM_REMOTE_READ = 1 << 12;
    public static final int PERM_REMOTE_WRITE = 1 << 13;
    public static final int PERM_ATOMIC = 1 << 14;
    public static final int PERM_MASK = 0x1f << 10;

    private MptEntry() {
    }

    /** {@code key_to_hw_index}. */
    public static int keyToHwIndex(int key) {
        return key << 24 | key >>> 8;
    }

    /** {@code hw_index_to_key}. */
    public static int hwIndexToKey(int ind) {
        return ind >>> 24 | ind << 8;
    }
}
