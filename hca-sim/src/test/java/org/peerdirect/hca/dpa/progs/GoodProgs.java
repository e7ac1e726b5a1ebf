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

    /** String concatenation and a record's toString and equals (javac's invokedynamic bootstraps). */
    public static long strings(long argbuf) {
        Pair p = new Pair(Dpa.ld64(argbuf), 2);
        String s = "pair " + p + " x=" + Dpa.ld64(argbuf + 8);
        return s.length() + (p.equals(new Pair(p.a(), 2)) ? 1000 : 0);
    }

    public static long sum(long argbuf) {
        long[] v = {Dpa.ld64(argbuf), Dpa.ld64(argbuf + 8)};
        return new Pair(v[0], v[1]).sum() + BIAS;
    }
}
