package org.peerdirect.hca.cx4.ifc;

/**
 * The send WQE's opcodes as the control segment carries them ({@code MLX5_OPCODE_*} of
 * {@code include/linux/mlx5/qp.h} and rdma-core's {@code mlx5dv.h}; the same values as
 * {@code MLX4_OPCODE_*}), and the FETH word a FLUSH carries in the control segment's immediate.
 * The segments around them are {@link Qp}'s ({@code CTRL_*}, {@code RADDR_*}, {@code ATOMIC_*},
 * {@code DATA_*}) and {@link Umr}'s. What libmlx5 and {@code mlx5_ib} write and the device model
 * reads: vocabulary only, no behaviour.
 */
public final class Wqe {

    private Wqe() {
    }

    public static final int OP_RDMA_WRITE = 0x08;
    public static final int OP_RDMA_WRITE_IMM = 0x09;
    public static final int OP_SEND = 0x0a;
    public static final int OP_SEND_IMM = 0x0b;
    public static final int OP_RDMA_READ = 0x10;
    public static final int OP_ATOMIC_CS = 0x11;
    public static final int OP_ATOMIC_FA = 0x12;
    /**
     * IBA 1.5 ATOMIC WRITE: 8 bytes from the atomic segment's first field stored at the remote
     * address with single-copy atomicity. The PRM defines no WQE opcode for it (upstream only rxe
     * carries the operation); the model takes the IBA RC opcode, {@code IB_OPCODE_RC_ATOMIC_WRITE} = 0x1D.
     */
    public static final int OP_ATOMIC_WRITE = 0x1d;
    /**
     * IBA 1.5 RDMA FLUSH. No PRM opcode exists (upstream only rxe carries it); the model takes the
     * IBA RC opcode, {@code IB_OPCODE_RC_FLUSH} = 0x1C. The WQE is a control segment whose
     * immediate carries the FETH word ({@link #FLUSH_TYPE_MASK}, {@link #FLUSH_LEVEL_SHIFT}) and a
     * remote-address segment whose reserved last word carries the length ({@link Qp#RADDR_FLUSH_LEN}).
     */
    public static final int OP_FLUSH = 0x1c;
    /** User-mode memory registration ({@code MLX5_OPCODE_UMR}): only on a REG_UMR QP, segments in {@link Umr}. */
    public static final int OP_UMR = 0x25;

    /** FETH placement type, bits 3:0 ({@code FETH_PLT_MASK}): {@link #FLUSH_GLOBAL} | {@link #FLUSH_PERSISTENT}. */
    public static final int FLUSH_TYPE_MASK = 0xf;
    /** FETH selectivity level, bits 5:4 ({@code FETH_SEL_MASK}, {@code FETH_SEL_SHIFT}). */
    public static final int FLUSH_LEVEL_SHIFT = 4;
    public static final int FLUSH_LEVEL_MASK = 0x30;
    /** Placement type {@code IB_FLUSH_GLOBAL}. */
    public static final int FLUSH_GLOBAL = 1;
    /** Placement type {@code IB_FLUSH_PERSISTENT}. */
    public static final int FLUSH_PERSISTENT = 1 << 1;
    /** Selectivity level {@code IB_FLUSH_RANGE}: the range is checked against the MR and flushed. */
    public static final int FLUSH_RANGE = 0;
    /** Selectivity level {@code IB_FLUSH_MR}: the whole MR, the range not checked. */
    public static final int FLUSH_MR = 1;

    /** The two atomics of IBA 1.2 (compare-and-swap, fetch-and-add). */
    public static boolean isAtomic(int op) {
        return op == OP_ATOMIC_CS || op == OP_ATOMIC_FA;
    }

    /**
     * True for the 8-byte operations on one remote word, which carry an atomic segment after the
     * remote-address segment: the two atomics and ATOMIC WRITE.
     */
    public static boolean hasAtomicSegment(int op) {
        return isAtomic(op) || op == OP_ATOMIC_WRITE;
    }

    /** True for the opcodes a send WQE of an RC, UD or XRC QP may carry on this device (UMR is a REG_UMR QP's own). */
    public static boolean valid(int op) {
        return op == OP_RDMA_WRITE || op == OP_RDMA_WRITE_IMM || op == OP_SEND || op == OP_SEND_IMM || op == OP_RDMA_READ
                || hasAtomicSegment(op) || op == OP_FLUSH;
    }
}
