package org.peerdirect.hca.engine;

/** QP states as the QP context encodes them ({@code MLX4_QP_STATE_*}). */
public enum HwQpState {
    RST(0), INIT(1), RTR(2), RTS(3), SQER(4), SQD(5), ERR(6);

    /** The context's state field. */
    public final int code;

    HwQpState(int code) {
        this.code = code;
    }

    /** States in which the responder accepts requests. */
    boolean receives() {
        return this == RTR || this == RTS || this == SQD;
    }

    /** States in which the requester executes the send queue. */
    boolean sends() {
        return this == RTS || this == SQD;
    }
}
