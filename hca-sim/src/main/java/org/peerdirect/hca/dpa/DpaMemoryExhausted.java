package org.peerdirect.hca.dpa;

/** DPA memory exhausted ({@code LIM_ERR} at the command level); the unit goes on working. */
public final class DpaMemoryExhausted extends RuntimeException {

    private static final long serialVersionUID = 1L;

    DpaMemoryExhausted(long need, long total) {
        super("DPA memory exhausted: no free range of " + need + " bytes in " + total);
    }
}
