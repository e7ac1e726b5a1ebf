package org.peerdirect.dpa.samples.dev;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The memory-model litmus set of DPA_MODEL.md §4 scenario 10 (§3.5; Seed 001's examples) as DOCA
 * kernels of two ranks (rank 0 writes, rank 1 reads): message passing with and without the W→W
 * fence, same-address order, 8-byte single-copy atomicity, a 16-byte copy read in halves, an
 * unaligned store. dpa-samples' {@code LitmusTest} and itest's {@code DocaScenariosIT} launch them.
 */
@DpaApp("dpa_litmus")
public final class LitmusDev {

    private LitmusDev() {
    }

    /** Reads a word of DPA memory as the DPA sees it. */
    @DpaRpc
    static long load64(long daddr) {
        return Dpa.ld64(daddr);
    }

    // ---------------------------------------------------------------- litmus kernels (2 ranks: 0 writes, 1 reads)
    // arg layout as hca-sim's MmProgs: +0 data, +64 flag, +128 out, +192 a 16-byte pair, +448 torn pairs,
    // +512 one 8-byte word, +520 torn words, +576 a same-address counter, +584 order violations seen

    /** Message passing without the W→W fence (C2's mutant): the reader may see the flag before the data. */
    @DpaGlobal
    static void mpNoFence(long arg) {
        if (DocaDpaDev.threadRank() == 0) {
            Dpa.st64(arg, 42);
            Dpa.st64(arg + 64, 1);
        } else {
            mpRead(arg);
        }
    }

    /** Message passing with the fence: the reader sees 42. */
    @DpaGlobal
    static void mpFence(long arg) {
        if (DocaDpaDev.threadRank() == 0) {
            Dpa.st64(arg, 42);
            Dpa.memoryFence(Dpa.W, Dpa.W);
            Dpa.st64(arg + 64, 1);
        } else {
            mpRead(arg);
        }
    }

    private static void mpRead(long arg) {
        while (Dpa.ld64(arg + 64) == 0) {
            Dpa.compilerBarrier();
        }
        Dpa.st64(arg + 128, Dpa.ld64(arg));
    }

    /** Rank 0 stores 1..20 to one word, rank 1 counts the loads that went backwards. */
    @DpaGlobal
    static void sameAddress(long arg) {
        if (DocaDpaDev.threadRank() == 0) {
            for (long i = 1; i <= 20; i++) {
                Dpa.st64(arg + 576, i);
            }
            return;
        }
        awaitFirst(arg + 576);
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
    }

    /** Rank 0 stores i|i<<32 as one 8-byte word, rank 1 counts loads whose halves differ (never: single-copy atomic). */
    @DpaGlobal
    static void word8(long arg) {
        if (DocaDpaDev.threadRank() == 0) {
            for (long i = 1; i <= 20; i++) {
                Dpa.st64(arg + 512, i | i << 32);
            }
            return;
        }
        awaitFirst(arg + 512);
        long torn = 0;
        for (int i = 0; i < 40; i++) {
            long v = Dpa.ld64(arg + 512);
            if ((int) v != (int) (v >>> 32)) {
                torn++;
            }
        }
        Dpa.st64(arg + 520, torn);
    }

    /**
     * Rank 0 copies 16 bytes 20 times as two 8-byte stores, first half then second; rank 1 waits
     * until it sees the last copy's second half, then reads the first: nothing orders the two halves
     * (one epoch of rank 0, no fence), so a reader that takes the second half as "the copy is
     * whole" relies on an atomicity the DPA does not give, and C2 reports it whatever the values
     * (the check's rule: a store read, then an earlier store of the same epoch). Waiting for the
     * last copy makes the report independent of the interleaving (CI: waiting only for the first
     * store, a writer done before the reader's loop gave nothing to report).
     */
    @DpaGlobal
    static void pair16(long arg) {
        if (DocaDpaDev.threadRank() == 0) {
            for (long i = 1; i <= 20; i++) {
                Dpa.st64(arg + 192, i);
                Dpa.st64(arg + 200, i);
            }
            return;
        }
        while (Dpa.ld64(arg + 200) != 20) {
            Dpa.compilerBarrier();
        }
        long torn = 0;
        for (int i = 0; i < 40; i++) {
            long b = Dpa.ld64(arg + 200);
            long a = Dpa.ld64(arg + 192);
            if (a != b) {
                torn++;
            }
        }
        Dpa.st64(arg + 448, torn);
    }

    /**
     * The reader waits until it sees the writer's first store there, so every round tests the
     * reads that follow a store seen (without it a reader that ran first would see only zeros).
     */
    private static void awaitFirst(long daddr) {
        while (Dpa.ld64(daddr) == 0) {
            Dpa.compilerBarrier();
        }
    }

    /** C5: an 8-byte store at a 4-byte offset. */
    @DpaGlobal
    static void unaligned(long arg) {
        Dpa.st64(arg + 4, 1);
    }
}
