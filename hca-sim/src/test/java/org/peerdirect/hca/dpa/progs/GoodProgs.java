package org.peerdirect.hca.dpa.progs;

import org.peerdirect.hca.dpa.isa.Dpa;

/** Device code the verifier accepts: records, static final constants, Math, arrays on the stack. */
public final class GoodProgs {

    static final long BIAS = 5;

    private GoodProgs() {
    }

    public record Pair(long a, long b) {
        long sum() {
            return Math.addExact(a, b);
        }
    }

    public static long sum(long argbuf) {
        long[] v = {Dpa.ld64(argbuf), Dpa.ld64(argbuf + 8)};
        return new Pair(v[0], v[1]).sum() + BIAS;
    }
}
