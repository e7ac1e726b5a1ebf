package org.peerdirect.flexio.impl;

/** A failure inside the runtime, with the {@code flexio_status} the public API reports it as. */
public final class FlexioFailure extends RuntimeException {

    private static final long serialVersionUID = 1L;
    public static final int FAILED = 1;
    public static final int TIMEOUT = 2;

    public final int status;

    public FlexioFailure(int status, String message) {
        super(message);
        this.status = status;
    }
}
