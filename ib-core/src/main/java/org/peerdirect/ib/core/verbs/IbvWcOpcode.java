package org.peerdirect.ib.core.verbs;

/** {@code enum ibv_wc_opcode}: what a completion was for. */
public enum IbvWcOpcode {
    SEND, RDMA_WRITE, RDMA_READ, COMP_SWAP, FETCH_ADD, BIND_MW, LOCAL_INV,
    /** {@code IBV_WC_ATOMIC_WRITE}: an ATOMIC WRITE completed at the requester. @since 0.7 */
    ATOMIC_WRITE,
    /** {@code IBV_WC_FLUSH}: an RDMA FLUSH completed at the requester. @since 0.8 */
    FLUSH,
    /** receive side: a SEND arrived. */
    RECV,
    /** receive side: an RDMA WRITE with immediate arrived. */
    RECV_RDMA_WITH_IMM
}
