package org.peerdirect.hca.cx3.ifc;

/**
 * The ConnectX-3's work queue entries as libmlx4 writes them into its queue buffer
 * ({@code providers/mlx4/wqe.h}, {@code include/linux/mlx4/qp.h}): a send WQE is a control segment
 * ({@code struct mlx4_wqe_ctrl_seg}), then the remote-address and atomic segments or the datagram
 * segment the opcode and service type call for, then data segments or inline segments, all in one
 * stride of the send queue ({@code 1 << log_sq_stride} bytes). A receive WQE is data segments
 * ended by one whose lkey is {@link #INVALID_LKEY}; an SRQ's has a next segment first
 * ({@code struct mlx4_wqe_srq_next_seg}). Offsets from the start of each segment, big-endian.
 *
 * <p>Ownership: a send WQE belongs to the hardware when the owner bit of its first word equals the
 * pass over the ring the WQE's index is on ({@code (index & wqe_cnt) != 0}); libmlx4 sets every
 * owner bit at RST2INIT ({@code mlx4_qp_init_sq_ownership}) so none is valid in the first pass,
 * and writes the first word of a WQE last.
 */
public final class Wqe {

    // struct mlx4_wqe_ctrl_seg (16 bytes)
    /** be32: owner bit (31), the WQE index for BlueFlame (23..8), opcode (4..0). */
    public static final int CTRL_OWNER_OPCODE = 0x00;
    /** be32 {@code bf_qpn} over {@code vlan_tag, ins_vlan, fence_size}: a BlueFlame WQE's QPN (31..8); the last byte is fence_size. */
    public static final int CTRL_BF_QPN = 0x04;
    /** u8: fence (bit 6), the WQE's size in 16-byte units (5..0). */
    public static final int CTRL_FENCE_SIZE = 0x07;
    /** be32: completion ({@link #CTRL_CQ_UPDATE}), solicited event ({@link #CTRL_SOLICITED}). */
    public static final int CTRL_SRCRB_FLAGS = 0x08;
    public static final int CTRL_IMM = 0x0c;
    public static final int CTRL_SIZE = 16;

    public static final int OWNER_BIT = 1 << 31;
    public static final int OPCODE_MASK = 0x1f;
    public static final int FENCE = 1 << 6;
    public static final int SIZE_MASK = 0x3f;
    /** {@code MLX4_WQE_CTRL_CQ_UPDATE}: both bits of the C field. */
    public static final int CTRL_CQ_UPDATE = 3 << 2;
    /** {@code MLX4_WQE_CTRL_SOLICIT}. */
    public static final int CTRL_SOLICITED = 1 << 1;

    /** Send opcodes ({@code MLX4_OPCODE_*}). */
    public static final int OP_NOP = 0x00;
    public static final int OP_RDMA_WRITE = 0x08;
    public static final int OP_RDMA_WRITE_IMM = 0x09;
    public static final int OP_SEND = 0x0a;
    public static final int OP_SEND_IMM = 0x0b;
    public static final int OP_RDMA_READ = 0x10;
    public static final int OP_ATOMIC_CS = 0x11;
    public static final int OP_ATOMIC_FA = 0x12;

    // struct mlx4_wqe_raddr_seg (16 bytes)
    public static final int RADDR_VA = 0x00;
    public static final int RADDR_RKEY = 0x08;
    public static final int RADDR_SIZE = 16;

    // struct mlx4_wqe_atomic_seg (16 bytes)
    public static final int ATOMIC_SWAP_ADD = 0x00;
    public static final int ATOMIC_COMPARE = 0x08;
    public static final int ATOMIC_SIZE = 16;

    // struct mlx4_wqe_datagram_seg (48 bytes): struct mlx4_av (32 bytes), dqpn, qkey
    /** be32: port (31..24), PD (23..0). */
    public static final int AV_PORT_PD = 0x00;
    /** u8: GRH present (bit 7), source LID path bits. */
    public static final int AV_G_SLID = 0x05;
    public static final int AV_G = 0x80;
    public static final int AV_DLID = 0x06;
    public static final int AV_GID_INDEX = 0x09;
    public static final int AV_HOP_LIMIT = 0x0b;
    public static final int AV_DGID = 0x10;
    public static final int AV_SIZE = 32;
    public static final int DATAGRAM_DQPN = 0x20;
    public static final int DATAGRAM_QKEY = 0x24;
    public static final int DATAGRAM_SIZE = 48;

    // struct mlx4_wqe_data_seg (16 bytes)
    public static final int DATA_BYTE_COUNT = 0x00;
    public static final int DATA_LKEY = 0x04;
    public static final int DATA_ADDR = 0x08;
    public static final int DATA_SIZE = 16;
    /** {@code MLX4_INVALID_LKEY}: ends a receive WQE's scatter list. */
    public static final int INVALID_LKEY = 0x100;

    /** {@code struct mlx4_wqe_inline_seg}: be32 {@link #INLINE_SEG} | the bytes that follow it. */
    public static final int INLINE_SEG = 1 << 31;
    public static final int INLINE_LEN_MASK = 0x3ff;
    public static final int INLINE_HDR = 4;
    /** {@code MLX4_INLINE_ALIGN}: an inline segment never crosses a 64-byte boundary of the WQE. */
    public static final int INLINE_ALIGN = 64;

    /** {@code stamp_send_wqe}'s value: the first word of each 64-byte chunk of a freed WQE after its first. */
    public static final int STAMP = 0xffff_ffff;

    // struct mlx4_wqe_srq_next_seg (16 bytes)
    /** be16: the index of the next WQE of the SRQ's free list. */
    public static final int SRQ_NEXT_WQE_INDEX = 0x02;
    public static final int SRQ_NEXT_SIZE = 16;

    /** The receive doorbell record: be32 {@code rq.head & 0xffff} (a QP), or the SRQ's 16-bit counter. */
    public static final int DB_RECORD = 0x00;

    private Wqe() {
    }

    /** True for the opcodes the ConnectX-3 executes from a send WQE. */
    public static boolean valid(int opcode) {
        return opcode == OP_RDMA_WRITE || opcode == OP_RDMA_WRITE_IMM || opcode == OP_SEND || opcode == OP_SEND_IMM
                || opcode == OP_RDMA_READ || opcode == OP_ATOMIC_CS || opcode == OP_ATOMIC_FA;
    }
}
