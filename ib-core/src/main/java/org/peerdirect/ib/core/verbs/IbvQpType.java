package org.peerdirect.ib.core.verbs;

/**
 * {@code enum ibv_qp_type} (the types this stack implements), in their C order: {@code RC} 2,
 * {@code UD} 4, {@code XRC_SEND} 9, {@code XRC_RECV} 10 ({@link #value()}).
 */
public enum IbvQpType {
    RC(2), UD(4),
    /**
     * {@code IBV_QPT_XRC_SEND}: an XRC initiator. Created like an RC QP on a PD with a send CQ;
     * it has no receive side (receive caps and CQ are ignored, as {@code ib_uverbs_create_qp}
     * zeroes them). Each send names the XRC SRQ that receives it ({@link IbvSendWr#remoteSrqn}).
     * @since 0.10
     */
    XRC_SEND(9),
    /**
     * {@code IBV_QPT_XRC_RECV}: an XRC target, created in an XRC domain
     * ({@link IbvContext#createQpEx}) with no PD, CQs or queues; it is moved to RTR and answers
     * one XRC send QP, delivering each message to the XRC SRQ of its domain the message names.
     * @since 0.10
     */
    XRC_RECV(10);

    private final int value;

    IbvQpType(int value) {
        this.value = value;
    }

    /** The {@code enum ibv_qp_type} value. */
    public int value() {
        return value;
    }
}
