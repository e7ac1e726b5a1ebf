package org.peerdirect.ib.core.verbs;

import org.peerdirect.kernel.mm.KernelException;

/** A post verb's failure: the errno and the first request not posted ({@code bad_wr}). */
public final class PostException extends KernelException {
    private static final long serialVersionUID = 1L;

    private final transient Object badWr;

    public PostException(Errno errno, String message, Object badWr) {
        super(errno, message);
        this.badWr = badWr;
    }

    /** The {@link IbvSendWr} or {@link IbvRecvWr} that was not posted. */
    public Object badWr() {
        return badWr;
    }
}
