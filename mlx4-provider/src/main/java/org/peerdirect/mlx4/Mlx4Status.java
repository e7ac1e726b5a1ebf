package org.peerdirect.mlx4;

import org.peerdirect.hca.cx3.ifc.Cqe;
import org.peerdirect.hca.cx3.ifc.QpContext;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvWcStatus;

/**
 * The driver's translations between hardware and verbs vocabulary: CQE syndrome to
 * {@code ibv_wc_status} ({@code mlx4_handle_error_cqe} of libmlx4), QP states
 * ({@code to_mlx4_state}, {@code from_mlx4_state}). Command statuses become errnos in
 * {@link org.peerdirect.mlx4.core.Cmd} ({@code mlx4_status_to_errno}).
 */
final class Mlx4Status {

    private Mlx4Status() {
    }

    /** {@code mlx4_handle_error_cqe}. */
    static IbvWcStatus status(int syndrome) {
        return switch (syndrome) {
            case Cqe.SYNDROME_LOCAL_LENGTH_ERR -> IbvWcStatus.LOC_LEN_ERR;
            case Cqe.SYNDROME_LOCAL_QP_OP_ERR -> IbvWcStatus.LOC_QP_OP_ERR;
            case Cqe.SYNDROME_LOCAL_PROT_ERR -> IbvWcStatus.LOC_PROT_ERR;
            case Cqe.SYNDROME_WR_FLUSH_ERR -> IbvWcStatus.WR_FLUSH_ERR;
            case Cqe.SYNDROME_MW_BIND_ERR -> IbvWcStatus.MW_BIND_ERR;
            case Cqe.SYNDROME_BAD_RESP_ERR -> IbvWcStatus.BAD_RESP_ERR;
            case Cqe.SYNDROME_LOCAL_ACCESS_ERR -> IbvWcStatus.LOC_ACCESS_ERR;
            case Cqe.SYNDROME_REMOTE_INVAL_REQ_ERR -> IbvWcStatus.REM_INV_REQ_ERR;
            case Cqe.SYNDROME_REMOTE_ACCESS_ERR -> IbvWcStatus.REM_ACCESS_ERR;
            case Cqe.SYNDROME_REMOTE_OP_ERR -> IbvWcStatus.REM_OP_ERR;
            case Cqe.SYNDROME_TRANSPORT_RETRY_EXC_ERR -> IbvWcStatus.RETRY_EXC_ERR;
            case Cqe.SYNDROME_RNR_RETRY_EXC_ERR -> IbvWcStatus.RNR_RETRY_EXC_ERR;
            case Cqe.SYNDROME_REMOTE_ABORTED_ERR -> IbvWcStatus.REM_ABORT_ERR;
            default -> IbvWcStatus.GENERAL_ERR;
        };
    }

    /** {@code from_mlx4_state}: a QP context's state. */
    static IbvQpState state(int mlx4State) {
        return switch (mlx4State) {
            case QpContext.STATE_RST -> IbvQpState.RESET;
            case QpContext.STATE_INIT -> IbvQpState.INIT;
            case QpContext.STATE_RTR -> IbvQpState.RTR;
            case QpContext.STATE_RTS -> IbvQpState.RTS;
            case QpContext.STATE_SQER -> IbvQpState.SQE;
            case QpContext.STATE_SQD -> IbvQpState.SQD;
            default -> IbvQpState.ERR;
        };
    }

    /** {@code to_mlx4_state}. */
    static int mlx4State(IbvQpState s) {
        return switch (s) {
            case RESET -> QpContext.STATE_RST;
            case INIT -> QpContext.STATE_INIT;
            case RTR -> QpContext.STATE_RTR;
            case RTS -> QpContext.STATE_RTS;
            case SQE -> QpContext.STATE_SQER;
            case SQD -> QpContext.STATE_SQD;
            case ERR -> QpContext.STATE_ERR;
        };
    }
}
