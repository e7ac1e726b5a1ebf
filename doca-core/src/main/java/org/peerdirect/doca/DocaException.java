package org.peerdirect.doca;

import java.util.Objects;

import org.peerdirect.kernel.mm.KernelException;

/**
 * A DOCA call that did not return {@link DocaError#DOCA_SUCCESS}: the Java form of a non-zero
 * {@code doca_error_t}. The message names the call and what was wrong, as DOCA's log line would.
 */
public final class DocaException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final DocaError error;

    public DocaException(DocaError error, String message) {
        super(failure(error).getName() + ": " + message);
        this.error = error;
    }

    public DocaException(DocaError error, String message, Throwable cause) {
        this(error, message);
        initCause(cause);
    }

    /** {@code error}, which must be a failure: an exception carrying DOCA_SUCCESS would be a lie. */
    private static DocaError failure(DocaError error) {
        Objects.requireNonNull(error, "error");
        if (error == DocaError.DOCA_SUCCESS) {
            throw new IllegalArgumentException("DOCA_SUCCESS is not an error");
        }
        return error;
    }

    /** The {@code doca_error_t} the call returned. */
    public DocaError error() {
        return error;
    }

    /** Throws {@code DocaException(error, message)} unless {@code ok}. */
    public static void check(boolean ok, DocaError error, String message) {
        if (!ok) {
            throw new DocaException(error, message);
        }
    }

    /**
     * The DOCA status of a verbs or kernel failure under a DOCA call ({@code what} names the call):
     * EINVAL, EFAULT and EOVERFLOW are invalid input, ENOMEM no memory, EPERM not permitted, EBUSY in
     * use, EOPNOTSUPP not supported, EAGAIN again, ENOENT not found, EEXIST already exist, ETIMEDOUT
     * time-out, ENODEV not connected (the device went away); the rest is a driver failure.
     */
    public static DocaException ofErrno(String what, KernelException e) {
        DocaError d = switch (e.errno()) {
            case EINVAL, EFAULT, EOVERFLOW, EBADF -> DocaError.DOCA_ERROR_INVALID_VALUE;
            case ENOMEM -> DocaError.DOCA_ERROR_NO_MEMORY;
            case EPERM -> DocaError.DOCA_ERROR_NOT_PERMITTED;
            case EBUSY -> DocaError.DOCA_ERROR_IN_USE;
            case EOPNOTSUPP -> DocaError.DOCA_ERROR_NOT_SUPPORTED;
            case EAGAIN -> DocaError.DOCA_ERROR_AGAIN;
            case ENOENT -> DocaError.DOCA_ERROR_NOT_FOUND;
            case EEXIST -> DocaError.DOCA_ERROR_ALREADY_EXIST;
            case ETIMEDOUT -> DocaError.DOCA_ERROR_TIME_OUT;
            case ENODEV -> DocaError.DOCA_ERROR_NOT_CONNECTED;
            default -> DocaError.DOCA_ERROR_DRIVER;
        };
        return new DocaException(d, what + ": " + e.getMessage(), e);
    }
}
