package org.peerdirect.hca.dpa.progs;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Check C8 litmus programs: a "library call" on an object is the span between
 * {@code Dpa.objectEnter} and {@code objectLeave}. {@code arg} layout: +0 the holder's object
 * address, +8 the intruder's, +64 the holder is inside (set by the holder), +128 the intruder is
 * done (set by the intruder), +192 the holder is done. The flags force the overlap: the holder
 * stays inside its object until the intruder has entered and left its own, so when the two
 * addresses are equal the intruder enters an object in use, whatever the interleaving.
 */
public final class ObjectProgs {

    private ObjectProgs() {
    }

    public static void holder(long arg) {
        long obj = Dpa.ld64(arg);
        Dpa.objectEnter(obj);
        Dpa.objectEnter(obj); // calls nest per thread: still one use
        Dpa.objectLeave(obj);
        Dpa.st64(arg + 64, 1);
        while (Dpa.ld64(arg + 128) == 0) {
            Dpa.compilerBarrier();
        }
        Dpa.objectLeave(obj);
        Dpa.st64(arg + 192, 1);
        Dpa.finish();
    }

    public static void intruder(long arg) {
        while (Dpa.ld64(arg + 64) == 0) {
            Dpa.compilerBarrier();
        }
        long obj = Dpa.ld64(arg + 8);
        Dpa.objectEnter(obj);
        Dpa.objectLeave(obj);
        Dpa.st64(arg + 128, 1);
        Dpa.finish();
    }

    /** Enters its object and ends the activation inside it, as a library call that unwinds would. */
    public static void unwinder(long arg) {
        Dpa.objectEnter(Dpa.ld64(arg));
        Dpa.finish();
    }

    /** Enters the intruder's object once (after the unwinder's activation ended). */
    public static void late(long arg) {
        long obj = Dpa.ld64(arg + 8);
        Dpa.objectEnter(obj);
        Dpa.objectLeave(obj);
        Dpa.st64(arg + 192, 1);
        Dpa.finish();
    }

    /** The instructions an enter and a leave retire, at +320: the annotations are no instructions. */
    public static void cost(long arg) {
        long obj = Dpa.ld64(arg);
        long before = Dpa.instRet();
        Dpa.objectEnter(obj);
        Dpa.objectLeave(obj);
        long after = Dpa.instRet();
        Dpa.st64(arg + 320, after - before);
        Dpa.finish();
    }
}
