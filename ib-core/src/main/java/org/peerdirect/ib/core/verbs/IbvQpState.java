package org.peerdirect.ib.core.verbs;

/**
 * {@code enum ibv_qp_state} with the transitions {@code ibv_modify_qp} accepts
 * ({@code ib_modify_qp_is_ok}): RESET → INIT → RTR → RTS; INIT → INIT; RTS → RTS; any state →
 * RESET or ERR; SQE → RTS. Anything else is EINVAL.
 */
public enum IbvQpState {
    RESET, INIT, RTR, RTS, SQD, SQE, ERR;

    /** Whether {@code ibv_modify_qp} may move a QP from this state to {@code next}. */
    public boolean canMoveTo(IbvQpState next) {
        if (next == RESET || next == ERR) {
            return true;
        }
        return switch (this) {
            case RESET -> next == INIT;
            case INIT -> next == INIT || next == RTR;
            case RTR -> next == RTS;
            case RTS -> next == RTS || next == SQD;
            case SQD -> next == RTS || next == SQD;
            case SQE -> next == RTS;
            case ERR -> false;
        };
    }

    /** The attribute-mask bits {@code ib_modify_qp_is_ok} requires for this transition of an RC or UD QP. */
    public static int requiredMask(IbvQpState from, IbvQpState to, IbvQpType type) {
        int m = IbvQpAttr.STATE;
        boolean requester = type == IbvQpType.RC || type == IbvQpType.XRC_SEND;
        boolean responder = type == IbvQpType.RC || type == IbvQpType.XRC_RECV;
        if (from == RESET && to == INIT) {
            m |= IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT | (type == IbvQpType.UD ? IbvQpAttr.QKEY : IbvQpAttr.ACCESS_FLAGS);
        } else if (from == INIT && to == RTR && type != IbvQpType.UD) {
            // ib_modify_qp_is_ok: the responder's depth and RNR timer only where there is a responder
            m |= IbvQpAttr.AV | IbvQpAttr.PATH_MTU | IbvQpAttr.DEST_QPN | IbvQpAttr.RQ_PSN
                    | (responder ? IbvQpAttr.MAX_DEST_RD_ATOMIC | IbvQpAttr.MIN_RNR_TIMER : 0);
        } else if (from == RTR && to == RTS) {
            m |= IbvQpAttr.SQ_PSN;
            if (requester) {
                m |= IbvQpAttr.TIMEOUT | IbvQpAttr.RETRY_CNT | IbvQpAttr.RNR_RETRY | IbvQpAttr.MAX_QP_RD_ATOMIC;
            } else if (type == IbvQpType.XRC_RECV) {
                m |= IbvQpAttr.TIMEOUT;
            }
        }
        return m;
    }
}
