package org.peerdirect.flexio.dev;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * {@code flexio_dev_queue_access.h}: getters of 64-byte mlx5 CQEs and builders of send/receive
 * WQE segments and doorbell records, over descriptor bytes in DPA memory. The descriptors are
 * big-endian (the PRM's); the DPA is little-endian, so each field is loaded or stored with its bytes
 * swapped. Offsets are those of {@code struct mlx5_cqe64}, {@code mlx5_wqe_ctrl_seg},
 * {@code mlx5_wqe_raddr_seg} and {@code mlx5_wqe_data_seg}.
 *
 * <p>The required sequences of the memory model are the caller's (S001): a WQE written here reaches
 * the NIC only after {@code __dpa_thread_memory_writeback} ({@link Dpa#memoryWriteback}) before the
 * doorbell; a receive WQE needs {@code memory_fence(W, W)} before its doorbell record is advanced.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_dev_queue_access.h</a>
 */
public final class FlexioDevQueue {

    /** Bytes of a CQE ({@code struct mlx5_cqe64}). */
    public static final int CQE_SIZE = 64;
    /** Bytes of a send WQE basic block ({@code MLX5_SEND_WQE_BB}). */
    public static final int SWQE_BB = 64;
    /** Bytes of a WQE segment (ctrl, rdma, data: {@code MLX5_SEND_WQE_DS}). */
    public static final int SEG_SIZE = 16;

    // CQE opcodes (op_own >> 4)
    public static final int CQE_REQ = 0x0;
    public static final int CQE_RESP_WR_IMM = 0x1;
    public static final int CQE_RESP_SEND = 0x2;
    public static final int CQE_RESP_SEND_IMM = 0x3;
    public static final int CQE_REQ_ERR = 0xd;
    public static final int CQE_RESP_ERR = 0xe;
    public static final int CQE_INVALID = 0xf;

    // send opcodes (MLX5_OPCODE_*)
    public static final int OPCODE_RDMA_WRITE = 0x08;
    public static final int OPCODE_RDMA_WRITE_IMM = 0x09;
    public static final int OPCODE_SEND = 0x0a;
    public static final int OPCODE_SEND_IMM = 0x0b;
    public static final int OPCODE_RDMA_READ = 0x10;

    /** {@code MLX5_WQE_CTRL_CQ_UPDATE}: the WQE's completion makes a CQE. */
    public static final int CTRL_CQ_UPDATE = 2 << 2;

    private static final long CQE_SRQN_UIDX = 0x20;
    private static final long CQE_IMM = 0x24;
    private static final long CQE_BYTE_CNT = 0x2c;
    private static final long CQE_HW_ERR_SYND = 0x34;
    private static final long CQE_VENDOR_ERR_SYND = 0x36;
    private static final long CQE_SYNDROME = 0x37;
    private static final long CQE_SOP_DROP_QPN = 0x38;
    private static final long CQE_WQE_COUNTER = 0x3c;
    private static final long CQE_OP_OWN = 0x3f;

    private FlexioDevQueue() {
    }

    private static int be32(long a) {
        return Integer.reverseBytes(Dpa.ld32(a));
    }

    private static void be32(long a, int v) {
        Dpa.st32(a, Integer.reverseBytes(v));
    }

    private static int be16(long a) {
        return Integer.reverseBytes(Dpa.ld16(a)) >>> 16;
    }

    // ------------------------------------------------------------------ CQE getters

    /** The CQE of index {@code ci} in a ring of {@code 2^logDepth} CQEs at {@code ring}. */
    public static long cqeAt(long ring, int ci, int logDepth) {
        return ring + (long) (ci & ((1 << logDepth) - 1)) * CQE_SIZE;
    }

    /** The owner bit ({@code flexio_dev_cqe_get_owner}); the CQE is software's when it equals {@code (ci >> logDepth) & 1}. */
    public static int cqeGetOwner(long cqe) {
        return Dpa.ld8(cqe + CQE_OP_OWN) & 1;
    }

    /** {@code op_own >> 4} ({@code flexio_dev_cqe_get_opcode}). */
    public static int cqeGetOpcode(long cqe) {
        return Dpa.ld8(cqe + CQE_OP_OWN) >>> 4;
    }

    /** Bytes received, or of the request ({@code flexio_dev_cqe_get_byte_cnt}). */
    public static int cqeGetByteCnt(long cqe) {
        return be32(cqe + CQE_BYTE_CNT);
    }

    /** The QP or SQ number ({@code flexio_dev_cqe_get_qpn}). */
    public static int cqeGetQpn(long cqe) {
        return be32(cqe + CQE_SOP_DROP_QPN) & 0xffffff;
    }

    /** The WQE counter ({@code flexio_dev_cqe_get_wqe_counter}). */
    public static int cqeGetWqeCounter(long cqe) {
        return be16(cqe + CQE_WQE_COUNTER);
    }

    /** The immediate of a SEND/WRITE with immediate, as received (big-endian value) ({@code flexio_dev_cqe_get_imm}). */
    public static int cqeGetImm(long cqe) {
        return be32(cqe + CQE_IMM);
    }

    /** {@code srqn_uidx}'s user index ({@code flexio_dev_cqe_get_user_index}). */
    public static int cqeGetUserIndex(long cqe) {
        return be32(cqe + CQE_SRQN_UIDX) & 0xffffff;
    }

    /** An error CQE's syndrome ({@code flexio_dev_cqe_get_err_synd}). */
    public static int cqeGetErrSynd(long cqe) {
        return Dpa.ld8(cqe + CQE_SYNDROME);
    }

    /** An error CQE's vendor syndrome ({@code flexio_dev_cqe_get_vendor_err_synd}). */
    public static int cqeGetVendorErrSynd(long cqe) {
        return Dpa.ld8(cqe + CQE_VENDOR_ERR_SYND);
    }

    /** An error CQE's hardware syndrome ({@code flexio_dev_cqe_get_hw_err_synd}). */
    public static int cqeGetHwErrSynd(long cqe) {
        return Dpa.ld8(cqe + CQE_HW_ERR_SYND);
    }

    // ------------------------------------------------------------------ send WQE segments

    /** The send WQE basic block of producer index {@code pi} in a ring of {@code 2^logDepth} blocks. */
    public static long swqeAt(long ring, int pi, int logDepth) {
        return ring + (long) (pi & ((1 << logDepth) - 1)) * SWQE_BB;
    }

    /**
     * The control segment: {@code opcode} at WQE index {@code sqPi} of send queue {@code sqNumber},
     * {@code ds} 16-byte segments in all, {@code ce} ({@link #CTRL_CQ_UPDATE} or 0) and immediate
     * {@code imm} ({@code flexio_dev_swqe_seg_ctrl_set}).
     */
    public static void swqeSegCtrlSet(long swqe, int sqPi, int sqNumber, int ce, int opcode, int ds, int imm) {
        be32(swqe, (sqPi & 0xffff) << 8 | opcode & 0xff);
        be32(swqe + 4, (sqNumber & 0xffffff) << 8 | ds & 0x3f);
        be32(swqe + 8, ce & 0xff);
        be32(swqe + 12, imm);
    }

    /** The remote-address segment of an RDMA operation ({@code flexio_dev_swqe_seg_rdma_set}). */
    public static void swqeSegRdmaSet(long seg, int rkey, long raddr) {
        Dpa.st64(seg, Long.reverseBytes(raddr));
        be32(seg + 8, rkey);
        be32(seg + 12, 0);
    }

    /** A data pointer segment ({@code flexio_dev_swqe_seg_mem_ptr_data_set}). */
    public static void swqeSegMemPtrDataSet(long seg, int byteCount, int lkey, long addr) {
        be32(seg, byteCount);
        be32(seg + 4, lkey);
        Dpa.st64(seg + 8, Long.reverseBytes(addr));
    }

    // ------------------------------------------------------------------ receive WQEs and doorbell records

    /** The buffer address of a receive WQE's (first) data segment ({@code flexio_dev_rwqe_get_addr}). */
    public static long rwqeGetAddr(long rwqe) {
        return Long.reverseBytes(Dpa.ld64(rwqe + 8));
    }

    /** Writes a receive WQE's data segment (the same layout as a send data segment). */
    public static void rwqeSet(long rwqe, int byteCount, int lkey, long addr) {
        swqeSegMemPtrDataSet(rwqe, byteCount, lkey, addr);
    }

    /** The receive counter of a QP's or RQ's doorbell record (dword 0). */
    public static int dbrRqGetPi(long dbr) {
        return be32(dbr) & 0xffff;
    }

    /**
     * Advances the receive doorbell record by one ({@code flexio_dev_dbr_rq_inc_pi}). The WQE must
     * be ordered before it ({@code memory_fence(W, W)}) and the record written back after it.
     */
    public static void dbrRqIncPi(long dbr) {
        be32(dbr, (dbrRqGetPi(dbr) + 1) & 0xffff);
    }

    /** The send counter of a QP's doorbell record (dword 1). */
    public static void dbrSqSetPi(long dbr, int pi) {
        be32(dbr + 4, pi & 0xffff);
    }

    /** A CQ's doorbell record: its consumer index ({@code flexio_dev_dbr_cq_set_ci}). */
    public static void dbrCqSetCi(long dbr, int ci) {
        be32(dbr, ci & 0xffffff);
    }
}
