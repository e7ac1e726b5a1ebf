package org.peerdirect.hca.engine;

/**
 * What executing one WQE came to: done, an outcome that retries later (an RNR NAK from the
 * responder, or no acknowledgement within the ACK timeout), or an error with the CQE syndrome the
 * completer writes.
 */
enum Outcome {
    SUCCESS(0),
    /** The responder had no receive WQE: back off by its RNR timer, retry (rnr_retry). */
    RNR_NAK(0),
    /** No acknowledgement (destination unreachable, PSN out of sequence): retransmit after the ACK timeout (retry_cnt). */
    NO_ACK(0),
    /**
     * A page of an on-demand entry was not present (a translation miss): the engine raised a
     * page-fault event; a requester-side miss stalls the send queue until {@code PAGE_FAULT_RESUME},
     * a responder-side miss answers with an RNR NAK.
     */
    PAGE_FAULT(0),
    /**
     * On a wire ({@link WireReq}): the WQE's packets are sent, its acknowledgement not yet come;
     * the send queue waits for the completer or the local ACK timeout.
     */
    AWAIT_ACK(0),
    LOC_LEN_ERR(Cqe.SYNDROME_LOCAL_LENGTH_ERR),
    LOC_QP_OP_ERR(Cqe.SYNDROME_LOCAL_QP_OP_ERR),
    LOC_PROT_ERR(Cqe.SYNDROME_LOCAL_PROT_ERR),
    WR_FLUSH_ERR(Cqe.SYNDROME_WR_FLUSH_ERR),
    REM_INV_REQ_ERR(Cqe.SYNDROME_REMOTE_INVAL_REQ_ERR),
    REM_ACCESS_ERR(Cqe.SYNDROME_REMOTE_ACCESS_ERR),
    REM_OP_ERR(Cqe.SYNDROME_REMOTE_OP_ERR),
    RETRY_EXC_ERR(Cqe.SYNDROME_TRANSPORT_RETRY_EXC_ERR),
    RNR_RETRY_EXC_ERR(Cqe.SYNDROME_RNR_RETRY_EXC_ERR);

    final int syndrome;

    Outcome(int syndrome) {
        this.syndrome = syndrome;
    }

    /** Class A/C errors of the IB spec: the responder NAKs and its QP goes to the error state too. */
    boolean responderFatal() {
        return this == REM_ACCESS_ERR || this == REM_INV_REQ_ERR || this == REM_OP_ERR;
    }

    /**
     * The affiliated asynchronous event the responder's QP raises with a {@link #responderFatal}
     * outcome (IBA 11.6.3: invalid request, local access violation, catastrophic work queue error).
     */
    int responderEvent() {
        return switch (this) {
            case REM_ACCESS_ERR -> AsyncEventHandler.WQ_ACCESS_ERROR;
            case REM_INV_REQ_ERR -> AsyncEventHandler.WQ_INVAL_REQ_ERROR;
            default -> AsyncEventHandler.WQ_CATAS_ERROR;
        };
    }
}
