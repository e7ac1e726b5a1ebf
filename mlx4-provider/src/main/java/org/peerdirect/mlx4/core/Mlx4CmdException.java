package org.peerdirect.mlx4.core;

import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.kernel.mm.KernelException;

/**
 * A command the firmware completed with a non-zero status: the errno
 * {@code mlx4_status_to_errno} gives, the status and the command named in the message.
 */
public final class Mlx4CmdException extends KernelException {
    private static final long serialVersionUID = 1L;

    private final int status;

    public Mlx4CmdException(String device, int opcode, int status) {
        super(errno(status), String.format("%s: %s failed with status %s(0x%x)", device, Mlx4Cmd.name(opcode), Mlx4Cmd.statusName(status), status));
        this.status = status;
    }

    public int status() {
        return status;
    }

    /**
     * {@code mlx4_status_to_errno}; the kernel's ENXIO, ENFILE and EACCES, which this kernel's
     * errno set lacks, become ENODEV, ENOMEM and EPERM.
     */
    public static Errno errno(int status) {
        return switch (status) {
            case Mlx4Cmd.STAT_INTERNAL_ERR -> Errno.EIO;
            case Mlx4Cmd.STAT_BAD_OP -> Errno.EPERM;
            case Mlx4Cmd.STAT_BAD_PARAM, Mlx4Cmd.STAT_BAD_QP_STATE, Mlx4Cmd.STAT_BAD_PKT -> Errno.EINVAL;
            case Mlx4Cmd.STAT_BAD_SYS_STATE -> Errno.ENODEV;
            case Mlx4Cmd.STAT_BAD_RESOURCE, Mlx4Cmd.STAT_BAD_RES_STATE, Mlx4Cmd.STAT_BAD_INDEX -> Errno.EBADF;
            case Mlx4Cmd.STAT_RESOURCE_BUSY, Mlx4Cmd.STAT_REG_BOUND -> Errno.EBUSY;
            case Mlx4Cmd.STAT_EXCEED_LIM, Mlx4Cmd.STAT_BAD_SIZE, Mlx4Cmd.STAT_ICM_ERROR -> Errno.ENOMEM;
            case Mlx4Cmd.STAT_BAD_NVMEM, Mlx4Cmd.STAT_BAD_SEG_PARAM -> Errno.EFAULT;
            case Mlx4Cmd.STAT_LAM_NOT_PRE -> Errno.EAGAIN;
            case Mlx4Cmd.STAT_MULTI_FUNC_REQ -> Errno.EPERM;
            default -> Errno.EIO;
        };
    }
}
