package org.peerdirect.flexio.progs;

/** Device code the silicon's verifier must refuse: it reaches a host class (rule {@code system}). */
public final class BadProgs {

    private BadProgs() {
    }

    public static long rpcClock(long argbuf) {
        return System.nanoTime();
    }
}
