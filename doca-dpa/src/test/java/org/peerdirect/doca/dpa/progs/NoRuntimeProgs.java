package org.peerdirect.doca.dpa.progs;

/**
 * A kernel packed by hand without doca-dpa-dev (no dpacc, so no kernel runtime and no launch
 * trampoline): what a launch on such an image must refuse naming the missing runtime.
 */
public final class NoRuntimeProgs {

    private NoRuntimeProgs() {
    }

    /** An empty {@code __dpa_global__}. */
    public static void empty(long arg) {
    }
}
