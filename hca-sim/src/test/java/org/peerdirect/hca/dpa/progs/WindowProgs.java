package org.peerdirect.hca.dpa.progs;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Window programs (the seed's window example and its mutants). {@code arg} layout: +0 window id,
 * +8 mkey, +16 host address, +24 window_config's result, +32 counter.
 */
public final class WindowProgs {

    private WindowProgs() {
    }

    /** Configures entity 0 and returns the DPA address of the host address, or 0 (result at +24). */
    static long acquire(long arg) {
        int rc = Dpa.windowConfig(Dpa.WINDOW_ENTITY_0, (int) Dpa.ld64(arg), (int) Dpa.ld64(arg + 8));
        Dpa.st64(arg + 24, rc);
        return rc != 0 ? 0 : Dpa.windowPtrAcquire(Dpa.WINDOW_ENTITY_0, Dpa.ld64(arg + 16));
    }

    public static void writeFF(long arg) {
        long p = acquire(arg);
        if (p != 0) {
            Dpa.st64(p, 0xff);
            Dpa.windowWriteback();
        }
        Dpa.finish();
    }

    public static void writeNoWriteback(long arg) {
        long p = acquire(arg);
        if (p != 0) {
            Dpa.st64(p, 0xff);
        }
        Dpa.finish();
    }

    public static void pollFlag(long arg) {
        long p = acquire(arg);
        while (Dpa.ld64(p) == 0) {
            Dpa.windowReadInv();
        }
        Dpa.st64(arg + 32, 1);
        Dpa.finish();
    }

    public static void pollNoInv(long arg) {
        long p = acquire(arg);
        while (Dpa.ld64(p) == 0) {
            Dpa.compilerBarrier();
        }
        Dpa.st64(arg + 32, 1);
        Dpa.finish();
    }

    /** Each activation writes its number to host memory and writes it back; the first configures the window. */
    public static void writeEach(long arg) {
        long n = Dpa.amoAdd64(arg + 32, 1) + 1;
        long p = n == 1 ? acquire(arg) : Dpa.windowPtrAcquire(Dpa.WINDOW_ENTITY_0, Dpa.ld64(arg + 16));
        Dpa.st64(p, n);
        Dpa.windowWriteback();
        Dpa.reschedule();
    }
}
