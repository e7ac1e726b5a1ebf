package org.peerdirect.mlx4;

import org.peerdirect.hca.cx3.ifc.Cqe;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwQpState;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The driver's translations between hardware and verbs vocabulary: command status to errno
 * ({@code mlx4_status_to_errno}), CQE syndrome to {@code ibv_wc_status}
 * ({@code mlx4_handle_error_cqe} of libmlx4), QP states.
 */
final class Mlx4Status {

    private Mlx4Status() {
    }

    /** A refused firmware command as the errno the kernel returns, naming the command's complaint. */
    static KernelException errno(String device, HwCommandException e) {
        Errno errno = switch (e.status()) {
            case HwCommandException.STAT_INTERNAL_ERR -> Errno.EIO;
            case HwCommandException.STAT_BAD_OP -> Errno.EPERM;
            case HwCommandException.STAT_RESOURCE_BUSY -> Errno.EBUSY;
            case HwCommandException.STAT_EXCEED_LIM, HwCommandException.STAT_BAD_SIZE -> Errno.ENOMEM;
            default -> Errno.EINVAL; // BAD_PARAM, BAD_QP_STATE, BAD_RESOURCE, BAD_RES_STATE, BAD_INDEX
        };
        return new KernelException(errno, device + ": firmware command failed with " + e.getMessage());
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

    static IbvQpState state(HwQpState s) {
        return switch (s) {
            case RST -> IbvQpState.RESET;
            case INIT -> IbvQpState.INIT;
            case RTR -> IbvQpState.RTR;
            case RTS -> IbvQpState.RTS;
            case SQD -> IbvQpState.SQD;
            case SQER -> IbvQpState.SQE;
            case ERR -> IbvQpState.ERR;
        };
    }

    static HwQpState hw(IbvQpState s) {
        return switch (s) {
            case RESET -> HwQpState.RST;
            case INIT -> HwQpState.INIT;
            case RTR -> HwQpState.RTR;
            case RTS -> HwQpState.RTS;
            case SQD -> HwQpState.SQD;
            case SQE -> HwQpState.SQER;
            case ERR -> HwQpState.ERR;
        };
    }
}
