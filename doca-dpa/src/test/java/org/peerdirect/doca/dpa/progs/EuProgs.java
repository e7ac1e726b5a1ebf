package org.peerdirect.doca.dpa.progs;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The EU qualification app (DPA_MODEL.md §4 scenario 10, DOCA's {@code dpa_nvqual} sample), the
 * thread group members and the memory-model litmus kernels, built by dpacc with doca-dpa-dev.
 *
 * <p>An nvqual thread's local storage ({@code struct dpa_nvqual_tls}), little-endian words:
 * {@link #TLS_EU} the EU the host pinned it to, {@link #TLS_RET} the address of its result,
 * {@link #TLS_DST} its buffer, {@link #TLS_SIZE} the buffer's bytes (a multiple of 256),
 * {@link #TLS_OPS} operations, {@link #TLS_SE} the sync event's DPA handle. Its result
 * ({@code struct dpa_nvqual_thread_ret}, {@link #RET_SIZE} bytes): virtual cycles, the EU it ran
 * on, errors seen (a word read back that is not what was written).
 */
@DpaApp("doca_dpa_eu")
public final class EuProgs {

    public static final int TLS_EU = 0;
    public static final int TLS_RET = 8;
    public static final int TLS_DST = 16;
    public static final int TLS_SIZE = 24;
    public static final int TLS_OPS = 32;
    public static final int TLS_SE = 40;
    public static final int TLS_SIZE_BYTES = 48;
    public static final int RET_CYCLES = 0;
    public static final int RET_EU = 8;
    public static final int RET_ERRORS = 16;
    public static final int RET_SIZE = 24;
    /** Bytes one memory-stress operation writes: 32 × 8 (DS {@code DPA_NVQUAL_MEMORY_BYTES_PER_OP}). */
    public static final int BYTES_PER_OP = 256;

    private EuProgs() {
    }

    /** {@code dpa_nvqual_entry_point}: notifies the {@code n} threads whose notification handles are at {@code handles}. */
    @DpaRpc
    static long entryPoint(long handles, int n) {
        for (int i = 0; i < n; i++) {
            DocaDpaDev.threadNotify(Dpa.ld64(handles + 8L * i));
        }
        return 0;
    }

    /** {@code dpa_nvqual_memory_stress_kernel}: writes 256-byte blocks through the buffer and reads each back. */
    @DpaGlobal
    static void memoryStress(long unused) {
        long tls = DocaDpaDev.threadGetLocalStorage();
        long c0 = Dpa.cycles();
        long errors = memoryOps(tls);
        report(tls, c0, errors, true);
    }

    /** Mutant: as {@link #memoryStress}, its result never written back before the host's d2h copy reads it (C1). */
    @DpaGlobal
    static void memoryStressNoWriteback(long unused) {
        long tls = DocaDpaDev.threadGetLocalStorage();
        long c0 = Dpa.cycles();
        long errors = memoryOps(tls);
        report(tls, c0, errors, false);
    }

    /** {@code dpa_nvqual_arithmetic_stress_kernel}: a multiply-add chain kept in DPA memory, checked against a recount. */
    @DpaGlobal
    static void arithmeticStress(long unused) {
        long tls = DocaDpaDev.threadGetLocalStorage();
        long c0 = Dpa.cycles();
        long acc = Dpa.ld64(tls + TLS_DST);
        long word = Dpa.ld64(tls + TLS_DST);
        long ops = Dpa.ld64(tls + TLS_OPS);
        long expect = acc;
        Dpa.st64(word, acc);
        for (long i = 0; i < ops; i++) {
            Dpa.st64(word, Dpa.ld64(word) * 6364136223846793005L + 1442695040888963407L);
            expect = expect * 6364136223846793005L + 1442695040888963407L;
        }
        report(tls, c0, Dpa.ld64(word) == expect ? 0 : 1, true);
    }

    private static long memoryOps(long tls) {
        long dst = Dpa.ld64(tls + TLS_DST);
        long size = Dpa.ld64(tls + TLS_SIZE);
        long ops = Dpa.ld64(tls + TLS_OPS);
        long errors = 0;
        for (long op = 0; op < ops; op++) {
            long base = dst + op * BYTES_PER_OP % size;
            for (int i = 0; i < BYTES_PER_OP / 8; i++) {
                Dpa.st64(base + 8L * i, op << 8 | i);
            }
            for (int i = 0; i < BYTES_PER_OP / 8; i++) {
                if (Dpa.ld64(base + 8L * i) != (op << 8 | i)) {
                    errors++;
                }
            }
        }
        return errors;
    }

    /** The result, written back for the host's d2h copy (unless the mutant skips it), then the event's add and finish. */
    private static void report(long tls, long c0, long errors, boolean writeback) {
        long ret = Dpa.ld64(tls + TLS_RET);
        Dpa.st64(ret + RET_CYCLES, Dpa.cycles() - c0);
        Dpa.st64(ret + RET_EU, Dpa.threadCtx().eu());
        Dpa.st64(ret + RET_ERRORS, errors);
        if (writeback) {
            Dpa.memoryWriteback();
        }
        DocaDpaDevSyncEvent.updateAdd(Dpa.ld64(tls + TLS_SE), 1);
        DocaDpaDev.threadFinish();
    }

    /** A thread group member: its rank and the group's size into its local storage's two words, then the event's add. */
    @DpaGlobal
    static void groupMember(long eventHandle) {
        long ls = DocaDpaDev.threadGetLocalStorage();
        Dpa.st64(ls, DocaDpaDev.threadRank());
        Dpa.st64(ls + 8, DocaDpaDev.numThreads());
        DocaDpaDevSyncEvent.updateAdd(eventHandle, 1);
        DocaDpaDev.threadFinish();
    }

    /** A kernel rank that counts itself at {@code counter}. */
    @DpaGlobal
    static void count(long counter) {
        Dpa.amoAdd64(counter, 1);
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
