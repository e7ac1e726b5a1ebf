package org.peerdirect.dpacc.link;

/** The packager refuses: a malformed descriptor, a missing class, or an image the verifier refuses (its rule named). */
public final class DpaccException extends Exception {

    private static final long serialVersionUID = 1L;

    /** The verifier's rule when it refused the image, else null. */
    public final String rule;

    DpaccException(String message, String rule) {
        super(message);
        this.rule = rule;
    }
}
