package org.peerdirect.ib.core.verbs;

/** {@code enum ibv_wr_opcode}: what a send work request does. */
public enum IbvWrOpcode {
    RDMA_WRITE, RDMA_WRITE_WITH_IMM, SEND, SEND_WITH_IMM, RDMA_READ, ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD,
    /**
     * {@code IBV_WR_ATOMIC_WRITE} (IBA 1.5, {@code ibv_wr_atomic_write}): the 8 bytes of
     * {@link IbvSendWr#compareAdd} stored at {@link IbvSendWr#remoteAddr} (8-byte aligned) with
     * single-copy atomicity, ordered after the QP's earlier writes. RC only; no gather list; the
     * responder needs remote write (QP and key), as for an RDMA WRITE. Devices that carry it
     * report {@link IbvDeviceAttr#DEVICE_ATOMIC_WRITE}.
     *
     * @since 0.7
     */
    ATOMIC_WRITE,
    /**
     * {@code IBV_WR_FLUSH} (IBA 1.5, {@code ibv_wr_flush(qp, rkey, remote_addr, len, type, level)}):
     * makes the responder's earlier writes to [{@link IbvSendWr#remoteAddr},
     * +{@link IbvSendWr#flushLength}) (level {@link IbvSendWr#FLUSH_RANGE}) or to the whole MR of
     * {@link IbvSendWr#rkey} ({@link IbvSendWr#FLUSH_MR}) globally visible
     * ({@link IbvSendWr#FLUSH_GLOBAL}) and/or persistent ({@link IbvSendWr#FLUSH_PERSISTENT}). RC
     * only; no gather list. The responder's QP and MR need the matching {@code IB_ACCESS_FLUSH_*}
     * right; devices that carry it report {@link IbvDeviceAttr#DEVICE_FLUSH_GLOBAL} /
     * {@link IbvDeviceAttr#DEVICE_FLUSH_PERSISTENT}. Completes like a zero-length RDMA READ, with
     * the flush length as {@code byte_len}.
     *
     * @since 0.8
     */
    FLUSH;

    /** The completion opcode of this request on the sender's CQ. */
    public IbvWcOpcode wcOpcode() {
        return switch (this) {
            case RDMA_WRITE, RDMA_WRITE_WITH_IMM -> IbvWcOpcode.RDMA_WRITE;
            case SEND, SEND_WITH_IMM -> IbvWcOpcode.SEND;
            case RDMA_READ -> IbvWcOpcode.RDMA_READ;
            case ATOMIC_CMP_AND_SWP -> IbvWcOpcode.COMP_SWAP;
            case ATOMIC_FETCH_AND_ADD -> IbvWcOpcode.FETCH_ADD;
            case ATOMIC_WRITE -> IbvWcOpcode.ATOMIC_WRITE;
            case FLUSH -> IbvWcOpcode.FLUSH;
        };
    }

    public boolean isAtomic() {
        return this == ATOMIC_CMP_AND_SWP || this == ATOMIC_FETCH_AND_ADD;
    }

    /** Consumes a receive WQE at the responder. */
    public boolean consumesRecv() {
        return this == SEND || this == SEND_WITH_IMM || this == RDMA_WRITE_WITH_IMM;
    }

    public boolean hasImm() {
        return this == SEND_WITH_IMM || this == RDMA_WRITE_WITH_IMM;
    }
}
