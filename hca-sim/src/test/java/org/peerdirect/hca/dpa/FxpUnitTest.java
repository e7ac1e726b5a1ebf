package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import java.util.function.IntUnaryOperator;
import java.util.stream.IntStream;

import org.junit.jupiter.api.Test;

/**
 * The Q16.16 intrinsics against a reference computed with double: each result is the exact value
 * rounded as FxpUnit documents (nearest 2^-16; log2 and pow2 a tie up, rcp a tie away from zero;
 * saturation at the int range). Where the double reference lies within 1e-6 of a tie the rounding
 * direction cannot be decided from it, so there the result may be either neighbour.
 */
class FxpUnitTest {

    private static final double Q = 65536.0;

    /** Checks {@code unit} against {@code ref} (the exact value in units of 2^-16, before rounding) on edges and random inputs. */
    private static void check(String name, IntUnaryOperator unit, java.util.function.IntToDoubleFunction ref, boolean tieAway,
            int... edges) {
        SplittableRandom r = new SplittableRandom(42);
        int[] xs = IntStream.concat(IntStream.of(edges), IntStream.generate(r::nextInt).limit(200_000)).toArray();
        int ties = 0;
        for (int x : xs) {
            double v = ref.applyAsDouble(x);
            double frac = Math.abs(v - Math.floor(v) - 0.5);
            long want = (long) (tieAway && v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5));
            want = Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, want));
            int got = unit.applyAsInt(x);
            if (frac < 1e-6) {
                ties++;
                assertTrue(Math.abs(got - want) <= 1, name + "(0x" + Integer.toHexString(x) + "): " + got + " vs " + want);
            } else {
                assertEquals(want, got, name + "(0x" + Integer.toHexString(x) + ") = " + v / Q + " (ref " + v + ")");
            }
        }
        assertTrue(ties < xs.length / 100, name + ": " + ties + " near-ties, too many to call the test exact");
    }

    @Test
    void log2IsTheExactValueRoundedToNearest() {
        check("fxp_log2", FxpUnit::log2, x -> x == 0 ? Double.NEGATIVE_INFINITY
                : Math.log(Integer.toUnsignedLong(x) / Q) / Math.log(2) * Q, false, 1, 2, 3, 0x8000, 0x10000, 0x18000, 0x20000,
                0x7fffffff, 0x80000000, 0xffffffff);
        assertEquals(Integer.MIN_VALUE, FxpUnit.log2(0), "log2(0) saturates to minus infinity");
        assertEquals(0, FxpUnit.log2(0x10000), "log2(1.0) = 0");
        assertEquals(-16 << 16, FxpUnit.log2(1), "log2(2^-16) = -16");
        assertEquals(15 << 16, FxpUnit.log2(0x80000000), "log2(32768.0) = 15, the input unsigned");
    }

    @Test
    void rcpIsTheExactValueRoundedToNearestATieAwayFromZero() {
        check("fxp_rcp", FxpUnit::rcp, x -> x == 0 ? Double.POSITIVE_INFINITY : Q * Q / x, true, 1, -1, 2, 3, 0x10000, -0x10000,
                0x20000, 0x30000, 0x7fffffff, Integer.MIN_VALUE);
        assertEquals(0x8000, FxpUnit.rcp(0x20000), "1/2.0 = 0.5");
        assertEquals(Integer.MAX_VALUE, FxpUnit.rcp(0), "1/0 saturates");
        assertEquals(Integer.MAX_VALUE, FxpUnit.rcp(1), "1/2^-16 = 2^16 saturates");
        assertEquals(Integer.MIN_VALUE, FxpUnit.rcp(-1), "and below");
        assertEquals(2, FxpUnit.rcp(0x7fffffff), "1/32767.99998 = 2.000000001 units rounds to 2");
    }

    @Test
    void pow2IsTheExactValueRoundedToNearest() {
        check("fxp_pow2", FxpUnit::pow2, x -> Math.pow(2, x / Q) * Q, false, 0, 0x10000, -0x10000, 0x8000, -0x8000, 14 << 16,
                (15 << 16) - 1, 15 << 16, -(16 << 16), -(17 << 16), -(18 << 16), Integer.MIN_VALUE, Integer.MAX_VALUE);
        assertEquals(0x10000, FxpUnit.pow2(0), "2^0 = 1.0");
        assertEquals(0x8000, FxpUnit.pow2(-0x10000), "2^-1 = 0.5");
        assertEquals(Integer.MAX_VALUE, FxpUnit.pow2(15 << 16), "2^15 saturates");
        assertEquals(0, FxpUnit.pow2(Integer.MIN_VALUE), "tiny results are 0");
    }
}
