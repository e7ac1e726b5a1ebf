package org.peerdirect.hca.dpa.progs;

import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Memory-model litmus programs. {@code arg} layout: +0 data, +64 flag, +128 out, +192 a 16-byte
 * pair, +256 RQ WQE, +320 RQ doorbell record, +448 torn pairs, +512 one 8-byte word, +520 torn
 * words, +576 a same-address counter, +584 order violations seen.
 */
public final class MmProgs {

    private MmProgs() {
    }

    public static void writerNoFence(long arg) {
        Dpa.st64(arg, 42);
        Dpa.st64(arg + 64, 1);
        Dpa.finish();
    }

    public static void writerFence(long arg) {
        Dpa.st64(arg, 42);
        Dpa.memoryFence(Dpa.W, Dpa.W);
        Dpa.st64(arg + 64, 1);
        Dpa.finish();
    }

    public static void reader(long arg) {
        while (Dpa.ld64(arg + 64) == 0) {
            Dpa.compilerBarrier();
        }
        Dpa.st64(arg + 128, Dpa.ld64(arg));
        Dpa.finish();
    }

    /** A 16-byte copy is two 8-byte stores. */
    public static void pairWriter(long arg) {
        for (long i = 1; i <= 20; i++) {
            Dpa.st64(arg + 192, i);
            Dpa.st64(arg + 200, i);
        }
        Dpa.finish();
    }

    public static void pairReader(long arg) {
        long torn = 0;
        for (int i = 0; i < 40; i++) {
            long a = Dpa.ld64(arg + 192);
            long b = Dpa.ld64(arg + 200);
            if (a != b) {
                torn++;
            }
        }
        Dpa.st64(arg + 448, torn);
        Dpa.finish();
    }

    /** One aligned 8-byte store carries the same value in both halves. */
    public static void wordWriter(long arg) {
        for (long i = 1; i <= 20; i++) {
            Dpa.st64(arg + 512, i | i << 32);
        }
        Dpa.finish();
    }

    public static void wordReader(long arg) {
        long torn = 0;
        for (int i = 0; i < 40; i++) {
            long v = Dpa.ld64(arg + 512);
            if ((int) v != (int) (v >>> 32)) {
                torn++;
            }
        }
        Dpa.st64(arg + 520, torn);
        Dpa.finish();
    }

    public static void sameAddrWriter(long arg) {
        for (long i = 1; i <= 20; i++) {
            Dpa.st64(arg + 576, i);
        }
        Dpa.finish();
    }

    public static void sameAddrReader(long arg) {
        long last = 0;
        long bad = 0;
        for (int i = 0; i < 40; i++) {
            long v = Dpa.ld64(arg + 576);
            if (v < last) {
                bad++;
            }
            last = v;
        }
        Dpa.st64(arg + 584, bad);
        Dpa.finish();
    }

    public static void rqNoFence(long arg) {
        Dpa.st64(arg + 256, 0xabc);
        Dpa.st32(arg + 320, 1);
        Dpa.memoryWriteback();
        Dpa.finish();
    }

    public static void rq(long arg) {
        Dpa.st64(arg + 256, 0xabc);
        Dpa.memoryFence(Dpa.W, Dpa.W);
        Dpa.st32(arg + 320, 1);
        Dpa.memoryWriteback();
        Dpa.finish();
    }

    public static void rqNoWriteback(long arg) {
        Dpa.st64(arg + 256, 0xabc);
        Dpa.memoryFence(Dpa.W, Dpa.W);
        Dpa.st32(arg + 320, 1);
        Dpa.finish();
    }

    public static void unaligned64(long arg) {
        Dpa.st64(arg + 4, 1);
        Dpa.finish();
    }
}
