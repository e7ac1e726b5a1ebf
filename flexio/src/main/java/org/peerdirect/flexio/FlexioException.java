package org.peerdirect.flexio;

/**
 * A FlexIO call that failed: its {@code flexio_status} ({@link FlexioStatus}) and a message naming
 * what was wrong (the command's syndrome, the process's status, the timeout).
 */
public final class FlexioException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final int status;

    public FlexioException(int status, String message, Throwable cause) {
        super(message, cause);
        this.status = status;
    }

    public FlexioException(int status, String message) {
        this(status, message, null);
    }

    /** {@link FlexioStatus#FAILED}, {@link FlexioStatus#TIMEOUT} or {@link FlexioStatus#FATAL_ERR}. */
    public int status() {
        return status;
    }
}
