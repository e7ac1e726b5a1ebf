package org.peerdirect.hca.cx4.ifc;

/**
 * A command mailbox block ({@code struct mlx5_cmd_prot_block}, 576 bytes, 1024-byte aligned):
 * 512 data bytes, then the chain's next pointer, the block number, the entry's token and the
 * signatures. Command byte N (N >= 16) is at block (N-16)/512, offset (N-16)%512.
 */
public final class CmdMailbox {

    private CmdMailbox() {
    }

    public static final int SIZE = 576;
    public static final int DATA = 0x000;
    public static final int DATA_SIZE = 512;
    /** Next block's address (bits 63:10, 1024-byte aligned; 0 ends the chain). */
    public static final long NEXT = 0x230;
    public static final long BLOCK_NUM = 0x238;
    public static final long TOKEN = 0x23d;
    public static final long CTRL_SIG = 0x23e;
    public static final long SIG = 0x23f;
    public static final long ALIGN = 1024;

    /** Blocks a command of {@code totalLength} bytes (inline part included) needs. */
    public static int blocks(int totalLength) {
        return totalLength <= CmdEntry.INLINE ? 0 : (totalLength - CmdEntry.INLINE + DATA_SIZE - 1) / DATA_SIZE;
    }
}
