package org.peerdirect.hca.dpa.progs;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of the RTOS tests (loaded only through a DPA image). {@code arg} is a scratch area
 * in the process heap: word 0 a counter or flag, word 1 an input.
 */
public final class RtosProgs {

    private RtosProgs() {
    }

    public static void count(long arg) {
        Dpa.amoAdd64(arg, 1);
        Dpa.reschedule();
    }

    /** Triggers itself twice while running: the first is latched, the second ignored. */
    public static void selfTrigger(long arg) {
        long n = Dpa.amoAdd64(arg, 1);
        if (n == 0) {
            int me = Dpa.threadCtx().threadId();
            Dpa.activate(me);
            Dpa.activate(me);
        }
        Dpa.reschedule();
    }

    public static void finishOnce(long arg) {
        Dpa.amoAdd64(arg, 1);
        Dpa.finish();
    }

    public static void retrigger5(long arg) {
        long n = Dpa.amoAdd64(arg, 1);
        if (n < 4) {
            Dpa.retrigger();
        }
        Dpa.finish();
    }

    public static void continuable(long arg) {
        Dpa.st64(arg, 1);
        Dpa.yieldContinuable();
        Dpa.st64(arg, 2);
        Dpa.finish();
    }

    public static void processFinish(long arg) {
        Dpa.processFinish();
    }

    public static void userError(long arg) {
        Dpa.error((int) Dpa.ld64(arg + 8));
    }

    /** Divides by word 0: a Java trap when it is 0. */
    public static void trap(long arg) {
        long z = Dpa.ld64(arg);
        Dpa.st64(arg + 8, 10 / z);
        Dpa.finish();
    }

    public static void outside(long arg) {
        Dpa.st64(8, 1);
    }

    public static void unaligned(long arg) {
        Dpa.st32(arg + 2, 1);
    }

    /** Busy-waits until word 0 becomes non-zero, then counts in word 1. */
    public static void spin(long arg) {
        while (Dpa.ld64(arg) == 0) {
            Dpa.compilerBarrier();
        }
        Dpa.amoAdd64(arg + 8, 1);
        Dpa.finish();
    }

    /**
     * Word 0 iterations of pure Java (a JDK call in the loop passes the verifier's heuristic): no
     * ISA call for as long as they take, then the result in word 1.
     */
    public static void javaLoop(long arg) {
        long n = Dpa.ld64(arg);
        long x = 1;
        for (long i = 0; i < n; i++) {
            x = Long.rotateLeft(x, 1) ^ i;
        }
        Dpa.st64(arg + 8, x);
        Dpa.finish();
    }

    public static void setFlag(long arg) {
        Dpa.st64(arg, 1);
        Dpa.finish();
    }

    public static void euId(long arg) {
        Dpa.st64(arg, Dpa.threadCtx().eu());
        Dpa.finish();
    }

    /** Twenty non-atomic increments: the interleaving decides how many are lost. */
    public static void racyIncrement(long arg) {
        for (int i = 0; i < 20; i++) {
            long v = Dpa.ld64(arg);
            Dpa.st64(arg, v + 1);
        }
        Dpa.finish();
    }

    /** Activates the thread id at word 1; stores the result in word 0. */
    public static void activateOther(long arg) {
        Dpa.st64(arg, Dpa.activate((int) Dpa.ld64(arg + 8)));
        Dpa.finish();
    }

    public static long add(long argbuf) {
        return Dpa.ld64(argbuf) + Dpa.ld64(argbuf + 8);
    }
}
