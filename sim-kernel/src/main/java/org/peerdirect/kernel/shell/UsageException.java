package org.peerdirect.kernel.shell;

/** A command was given an argument it cannot use; the message names the command and the argument. */
public class UsageException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public UsageException(String message) {
        super(message);
    }
}
