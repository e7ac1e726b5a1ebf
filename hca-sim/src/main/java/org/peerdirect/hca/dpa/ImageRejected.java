package org.peerdirect.hca.dpa;

/**
 * An image the loader or the verifier refuses, naming the rule broken and where
 * ({@code BAD_PARAM} with a syndrome at the command level).
 */
public final class ImageRejected extends Exception {

    private static final long serialVersionUID = 1L;

    /** The rule: {@code malformed-image}, {@code malformed-class}, {@code reflection}, {@code threads}, ... */
    public final String rule;

    ImageRejected(String rule, String where, String detail) {
        super("DPA image refused, rule " + rule + ": " + where + ": " + detail);
        this.rule = rule;
    }
}
