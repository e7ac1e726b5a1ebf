package org.peerdirect.kernel.mm;

/**
 * A kernel call that fails the way the real one returns {@code -errno}: the errno says which
 * failure, the message says what was wrong and, where there is one, what to do.
 */
public class KernelException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The errno values the simulated kernel returns. */
    public enum Errno {
        /** bad argument: unaligned, zero or overflowing range, unknown flag. */
        EINVAL,
        /** out of memory, or the memlock limit is exceeded. */
        ENOMEM,
        /** bad address: no VMA, a device mapping where pages are needed. */
        EFAULT,
        /** permission: a protection forbids the access. */
        EPERM,
        /** the range changed meanwhile (an invalidation ran): retry. */
        EBUSY,
        /** the call is not supported for this mapping. */
        EOPNOTSUPP,
        /** out of the address space or an arithmetic overflow of the range. */
        EOVERFLOW,
        /** the device failed or was removed (hot-unplug): the object is dead. */
        EIO,
        /** no such device. */
        ENODEV,
        /** try again: a table is full for now (fork at pid_max). */
        EAGAIN,
        /** no such entry: a key that names no object of the kind asked for. */
        ENOENT,
        /** bad file descriptor: not open in the process, or not the kind of file the call needs. */
        EBADF,
        /** a bounded wait ran out (a dma-buf fence the exporter did not signal in time). */
        ETIMEDOUT,
        /** interrupted: the calling thread was interrupted in a wait. */
        EINTR,
        /** exists already: a name taken (a module loaded twice). */
        EEXIST
    }

    private final Errno errno;

    public KernelException(Errno errno, String message) {
        super(errno + ": " + message);
        this.errno = errno;
    }

    /** With the failure that caused it (a device's error under a kernel call). */
    public KernelException(Errno errno, String message, Throwable cause) {
        super(errno + ": " + message, cause);
        this.errno = errno;
    }

    public Errno errno() {
        return errno;
    }
}
