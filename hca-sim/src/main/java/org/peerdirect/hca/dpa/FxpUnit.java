package org.peerdirect.hca.dpa;

/**
 * The DPA's Q16.16 fixed-point unit ({@code __dpa_fxp_log2}, {@code _rcp}, {@code _pow2},
 * DPA_MODEL.md §1.5 "Misc intrinsics"), in integer arithmetic so each result is the exact value
 * rounded as documented, independent of floating point. The rounding rules are the model's
 * ([model]: NVIDIA documents the intrinsics' names and format, not their rounding): log2 and pow2
 * round to the nearest 2^-16 with a tie up, rcp to the nearest with a tie away from zero; results
 * saturate to the int range.
 */
final class FxpUnit {

    /** Cycles charged per intrinsic ([model] cost table, beside Runner's). */
    static final int CYCLES = 4;

    /** 2^(2^-k) for k = 1..17 as Q2.62 (the pow2 factor of each fraction bit, bit 15 first). */
    private static final long[] ROOTS = new long[17];

    static {
        // sqrt by Newton on BigInteger: 2^(2^-k) = sqrt(2^(2^-(k-1))), each exact to 62 bits
        java.math.BigInteger one62 = java.math.BigInteger.ONE.shiftLeft(62);
        java.math.BigInteger v = one62.shiftLeft(1); // 2.0 in Q.62
        for (int k = 0; k < ROOTS.length; k++) {
            v = v.multiply(one62).sqrt(); // sqrt(v * 2^62) = sqrt(value) * 2^62
            ROOTS[k] = v.longValueExact();
        }
    }

    private FxpUnit() {
    }

    /** log2 of unsigned Q16.16 {@code x}, as signed Q16.16; 0 gives {@link Integer#MIN_VALUE}. */
    static int log2(int x) {
        if (x == 0) {
            return Integer.MIN_VALUE;
        }
        long u = Integer.toUnsignedLong(x);
        int msb = 63 - Long.numberOfLeadingZeros(u);
        long m = u << (62 - msb); // mantissa in [1, 2) as Q1.62
        long frac = 0;
        // 17 fraction bits by repeated squaring (one more than kept, for rounding); m stays in [1, 2)
        for (int i = 0; i < 17; i++) {
            long sq = Math.multiplyHigh(m, m); // m^2 as Q.60 (in [1, 4))
            frac <<= 1;
            if (sq >= 1L << 61) {
                frac |= 1;
                m = sq << 1; // m^2 / 2 as Q.62
            } else {
                m = sq << 2;
            }
        }
        // q17 = floor(log2(x / 2^16) * 2^17); adding one half-unit and halving rounds to 2^-16, a tie up
        long q17 = ((long) (msb - 16) << 17) + frac;
        return (int) ((q17 + 1) >> 1);
    }

    /** 1/x of signed Q16.16 {@code x}; 0 gives {@link Integer#MAX_VALUE}. */
    static int rcp(int x) {
        if (x == 0) {
            return Integer.MAX_VALUE;
        }
        long a = Math.abs((long) x);
        long q = ((1L << 33) + a) / (2 * a); // floor(2^32 / a + 1/2): the magnitude rounded, a tie away from zero
        long r = x < 0 ? -q : q;
        return (int) Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, r));
    }

    /** 2^x of signed Q16.16 {@code x}, as Q16.16 saturated to {@link Integer#MAX_VALUE}. */
    static int pow2(int x) {
        int ip = x >> 16; // floor
        int f = x & 0xffff;
        if (ip >= 15) {
            return Integer.MAX_VALUE;
        }
        long m = 1L << 62; // 1.0 as Q2.62
        for (int k = 0; k < 16; k++) {
            if ((f & (1 << (15 - k))) != 0) {
                m = Math.multiplyHigh(m, ROOTS[k]) << 2; // Q.62 * Q.62 >> 64 = Q.60
            }
        }
        // value = m * 2^(ip - 62) in units of 2^-16: m * 2^(ip + 16 - 62)
        int shift = 62 - 16 - ip;
        if (shift >= 64) {
            return 0; // below 2^-17: rounds to 0
        }
        long r = (m + (1L << (shift - 1))) >>> shift; // unsigned: m + half < 2^64 even at shift 63
        return (int) Math.min(Integer.MAX_VALUE, r);
    }
}
