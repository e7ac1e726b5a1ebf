package org.peerdirect.hca.dpa.progs;

import org.peerdirect.hca.dpa.isa.Dpa;
import org.peerdirect.hca.dpa.isa.Hart;

/** Device code the verifier must refuse, one rule each (packaged, never run). */
public final class BadProgs {

    private BadProgs() {
    }

    public static final class Reflection {
        public static void run(long a) {
            Dpa.st64(a, "x".getClass().getName().length());
        }
    }

    public static final class Threads {
        public static void run(long a) {
            Dpa.st64(a, Thread.currentThread().threadId());
        }
    }

    public static final class Monitor {
        public static void run(long a) {
            Object lock = new Object();
            synchronized (lock) {
                Dpa.st64(a, 1);
            }
        }
    }

    public static final class SystemCall {
        public static void run(long a) {
            Dpa.st64(a, System.nanoTime());
        }
    }

    public static final class Io {
        public static void run(long a) {
            Dpa.st64(a, new java.io.File("x").length());
        }
    }

    public static final class Host {
        public static void run(long a) {
            Dpa.st64(a, new java.util.ArrayList<String>().size());
        }
    }

    public static final class MutableStatic {
        static long counter;

        public static void run(long a) {
            counter++;
        }
    }

    public static final class StaticArray {
        static final long[] TABLE = {1, 2};

        public static void run(long a) {
            Dpa.st64(a, TABLE[0]);
        }
    }

    public static final class CatchThrowable {
        public static void run(long a) {
            try {
                Dpa.reschedule();
            } catch (Throwable e) {
                Dpa.st64(a, 1);
            }
        }
    }

    public static final class Finally {
        public static void run(long a) {
            try {
                Dpa.st64(a, 1);
            } finally {
                Dpa.st64(a + 8, 1);
            }
        }
    }

    public static final class LoopWithoutCall {
        public static void run(long a) {
            long x = a;
            while (x != 0) {
                x = x * 3 + 1;
            }
            Dpa.st64(a, x);
        }
    }

    public static final class HartDirect {
        public static void run(long a) {
            Hart.CURRENT.get().store(a, 8, 1);
        }
    }
}
