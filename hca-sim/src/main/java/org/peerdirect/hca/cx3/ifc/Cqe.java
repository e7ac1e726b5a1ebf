package org.peerdirect.hca.cx3.ifc;

/**
 * {@code struct mlx4_cqe} and {@code struct mlx4_err_cqe} ({@code include/linux/mlx4/cq.h}): 32
 * bytes in the CQ's ring, big-endian, the owner/opcode byte last. The device writes CQE number
 * {@code i} with the owner bit of its pass over the ring ({@code i & nent}, nent a power of two),
 * the owner byte last; software owns the entry when that bit equals its own pass
 * ({@code (owner_sr_opcode & OWNER_MASK) ^ !!(cons_index & nent)} is zero, {@code get_sw_cqe});
 * a ring starts with every owner bit set. The consumer index goes back to the device through the
 * CQ's doorbell record ({@link #DB_SET_CI}).
 */
public final class Cqe {

    public static final int SIZE = 32;

    /** be32: the QP number in bits 23..0 ({@link #QPN_MASK}); {@code mlx4_err_cqe.my_qpn} too. */
    public static final int VLAN_MY_QPN = 0x00;
    /** be32: the immediate of a receive with immediate. */
    public static final int IMMED_RSS_INVALID = 0x04;
    /** be32: G (a GRH precedes the data, bit 31), the path bits, the remote QP number of a UD receive (23..0). */
    public static final int G_MLPATH_RQPN = 0x08;
    /** be16: the remote SL in bits 15..12 (UD). */
    public static final int SL_VID = 0x0c;
    /** be16: the remote LID (UD). */
    public static final int RLID = 0x0e;
    public static final int BYTE_CNT = 0x14;
    /** be16: the completed WQE's index in its queue (a send queue's counter, an SRQ's slot). */
    public static final int WQE_INDEX = 0x18;
    /** u8 ({@code mlx4_err_cqe}): the vendor's syndrome. */
    public static final int VENDOR_ERR_SYNDROME = 0x1a;
    /** u8 ({@code mlx4_err_cqe}): {@code MLX4_CQE_SYNDROME_*}. */
    public static final int SYNDROME = 0x1b;
    /** u8: owner bit, is-send bit, opcode. */
    public static final int OWNER_SR_OPCODE = 0x1f;

    public static final int OWNER_MASK = 0x80;
    public static final int IS_SEND_MASK = 0x40;
    public static final int OPCODE_MASK = 0x1f;
    public static final int QPN_MASK = 0xff_ffff;
    public static final int G_BIT = 1 << 31;
    public static final int SL_SHIFT = 12;

    /** Receive opcodes ({@code MLX4_RECV_OPCODE_*}). */
    public static final int RECV_RDMA_WRITE_IMM = 0x00;
    public static final int RECV_SEND = 0x01;
    public static final int RECV_SEND_IMM = 0x02;
    public static final int RECV_SEND_INVAL = 0x03;
    /** {@code MLX4_CQE_OPCODE_ERROR}: an {@code mlx4_err_cqe}, the syndrome says what failed. */
    public static final int OPCODE_ERROR = 0x1e;

    /**
     * A send completion's opcode is its WQE's ({@code MLX4_OPCODE_*}, {@code include/linux/mlx4/qp.h}):
     * the ones libmlx4's {@code mlx4_poll_one} turns into an {@code ibv_wc_opcode}.
     */
    public static final int SEND_RDMA_WRITE = 0x08;
    public static final int SEND_RDMA_WRITE_IMM = 0x09;
    public static final int SEND_SEND = 0x0a;
    public static final int SEND_SEND_IMM = 0x0b;
    public static final int SEND_RDMA_READ = 0x10;
    public static final int SEND_ATOMIC_CS = 0x11;
    public static final int SEND_ATOMIC_FA = 0x12;

    /** Syndromes of an error CQE ({@code MLX4_CQE_SYNDROME_*}). */
    public static final int SYNDROME_LOCAL_LENGTH_ERR = 0x01;
    public static final int SYNDROME_LOCAL_QP_OP_ERR = 0x02;
    public static final int SYNDROME_LOCAL_PROT_ERR = 0x04;
    public static final int SYNDROME_WR_FLUSH_ERR = 0x05;
    public static final int SYNDROME_MW_BIND_ERR = 0x06;
    public static final int SYNDROME_BAD_RESP_ERR = 0x10;
    public static final int SYNDROME_LOCAL_ACCESS_ERR = 0x11;
    public static final int SYNDROME_REMOTE_INVAL_REQ_ERR = 0x12;
    public static final int SYNDROME_REMOTE_ACCESS_ERR = 0x13;
    public static final int SYNDROME_REMOTE_OP_ERR = 0x14;
    public static final int SYNDROME_TRANSPORT_RETRY_EXC_ERR = 0x15;
    public static final int SYNDROME_RNR_RETRY_EXC_ERR = 0x16;
    public static final int SYNDROME_REMOTE_ABORTED_ERR = 0x22;

    /** The CQ's doorbell record ({@code struct mlx4_cq}'s {@code set_ci_db}, {@code arm_db}): be32 consumer index (23..0) at 0. */
    public static final int DB_SET_CI = 0x00;
    public static final int DB_ARM = 0x04;
    /** Bytes of the doorbell record (8-byte aligned). */
    public static final int DB_SIZE = 8;

    private Cqe() {
    }
}
