package org.peerdirect.hca.engine;

/**
 * The work-queue vocabulary of the silicon: WQE opcodes and control flags as the ConnectX
 * hardware defines them ({@code MLX4_OPCODE_*} in {@code include/linux/mlx4/qp.h}; the mlx5 values
 * are the same), shared by the send-WQE layout {@link SendWqe} and the receive-WQE layout
 * {@link RecvWqe}. The engine's own copy: drivers and user libraries take the values from their
 * device's layout package ({@code org.peerdirect.hca.cx4.ifc.Wqe} for the ConnectX-4+), and the
 * model's {@code IfcVocabularyTest} checks the two agree.
 */
public final class Wqe {

    public static final int OP_RDMA_WRITE = 0x08;
    public static final int OP_RDMA_WRITE_IMM = 0x09;
    public static final int OP_SEND = 0x0a;
    public static final int OP_SEND_IMM = 0x0b;
    public static final int OP_RDMA_READ = 0x10;
    public static final int OP_ATOMIC_CS = 0x11;
    public static final int OP_ATOMIC_FA = 0x12;
    /**
     * IBA 1.5 ATOMIC WRITE: 8 bytes from the atomic segment's first field stored at the remote
     * address with single-copy atomicity, after every earlier write of the QP. The PRM defines no
     * WQE opcode for it (upstream only rxe carries the operation); the model takes the IBA RC
     * opcode, {@code IB_OPCODE_RC_ATOMIC_WRITE} = 0x1D.
     */
    public static final int OP_ATOMIC_WRITE = 0x1d;
    /**
     * IBA 1.5 RDMA FLUSH: the responder makes its earlier writes to a range (or to the whole MR of
     * the rkey) globally visible and/or persistent, then acknowledges like a zero-length RDMA
     * READ. No PRM opcode exists (upstream only rxe carries it); the model takes the IBA RC
     * opcode, {@code IB_OPCODE_RC_FLUSH} = 0x1C. The WQE is a control segment whose immediate
     * field carries the FETH word ({@link #FLUSH_TYPE_MASK}, {@link #FLUSH_LEVEL_SHIFT}) and a
     * remote-address segment whose reserved last word carries the length.
     */
    public static final int OP_FLUSH = 0x1c;
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
    /** User-mode memory registration ({@code MLX5_OPCODE_UMR}): only on a REG_UMR QP, see {@link UmrWqe}. */
    public static final int OP_UMR = 0x25;
    /**
     * Not an opcode of the wire: the slot of a WQE the device could not parse (unknown opcode, DS
     * count, QPN of another QP, segments). The requester completes it with
     * {@code LOCAL_QP_OP_ERR} (IBA's "local QP operation error": an inconsistency in the work
     * request) and moves the QP to ERR; the WQEs after it flush. Outside the byte range of real
     * opcodes, so no WQE can carry it.
     */
    public static final int OP_MALFORMED = 0x100;

    /** Control segment: generate a CQE on success ({@code MLX4_WQE_CTRL_CQ_UPDATE}). */
    public static final int CTRL_CQ_UPDATE = 1;
    /** Control segment: solicited event at the responder ({@code MLX4_WQE_CTRL_SOLICITED}). */
    public static final int CTRL_SOLICITED = 1 << 1;
    /** Control segment: fence ({@code MLX4_WQE_CTRL_FENCE}). */
    public static final int CTRL_FENCE = 1 << 2;
    /** The data segment is inline ({@code MLX4_INLINE_SEG}): the bytes travel in the WQE. */
    public static final int CTRL_INLINE = 1 << 3;

    private Wqe() {
    }

    /** True for opcodes that carry an immediate. */
    public static boolean hasImm(int op) {
        return op == OP_SEND_IMM || op == OP_RDMA_WRITE_IMM;
    }

    public static boolean isAtomic(int op) {
        return op == OP_ATOMIC_CS || op == OP_ATOMIC_FA;
    }

    /**
     * True for the 8-byte operations on one remote word, which carry an atomic segment and travel
     * in one packet: the two atomics and ATOMIC WRITE.
     */
    public static boolean hasAtomicSegment(int op) {
        return isAtomic(op) || op == OP_ATOMIC_WRITE;
    }

    /** True for opcodes the responder answers with data (READ, atomics): local SGEs are written. */
    public static boolean readsResponse(int op) {
        return op == OP_RDMA_READ || isAtomic(op);
    }

    /** True when the opcode is one the engine executes. */
    public static boolean valid(int op) {
        return op == OP_RDMA_WRITE || op == OP_RDMA_WRITE_IMM || op == OP_SEND || op == OP_SEND_IMM || op == OP_RDMA_READ
                || hasAtomicSegment(op) || op == OP_FLUSH;
    }
}
