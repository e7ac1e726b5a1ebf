package org.peerdirect.dpa.samples.dev;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of {@code dpa:sample nvqual}: DOCA's {@code dpa_nvqual} EU qualification
 * ({@code samples/doca_dpa/dpa_nvqual/device}, doca-samples 3.3; DPA_MODEL.md §4 scenario 10), its
 * entry-point RPC and its memory and arithmetic stress kernels, and the mutant memory kernel that
 * does not write its result back before the host's copy reads it (C1; {@code dpa:sample
 * nvqual_fence}). Exported: itest runs the same code through the sample.
 *
 * <p>A thread's local storage ({@code struct dpa_nvqual_tls}), little-endian words:
 * {@link #TLS_EU} the EU the host pinned it to, {@link #TLS_RET} the address of its result,
 * {@link #TLS_DST} its buffer, {@link #TLS_SIZE} the buffer's bytes (a multiple of 256),
 * {@link #TLS_OPS} operations, {@link #TLS_SE} the sync event's DPA handle. Its result
 * ({@code struct dpa_nvqual_thread_ret}, {@link #RET_SIZE} bytes): virtual cycles, the EU it ran
 * on, errors seen (a word read back that is not what was written).
 */
@DpaApp("dpa_sample_nvqual")
public final class NvqualDev {

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

    private NvqualDev() {
    }

    /** {@code dpa_nvqual_entry_point}: notifies the {@code n} threads whose notification handles are at {@code handles}. */
    @DpaRpc("dpa_nvqual_entry_point")
    static long entryPoint(long handles, int n) {
        for (int i = 0; i < n; i++) {
            DocaDpaDev.threadNotify(Dpa.ld64(handles + 8L * i));
        }
        return 0;
    }

    /** {@code dpa_nvqual_memory_stress_kernel}: writes 256-byte blocks through the buffer and reads each back. */
    @DpaGlobal("dpa_nvqual_memory_stress_kernel")
    static void memoryStress(long unused) {
        long tls = DocaDpaDev.threadGetLocalStorage();
        long c0 = Dpa.cycles();
        long errors = memoryOps(tls);
        report(tls, c0, errors, true);
    }

    /** Mutant: as {@link #memoryStress}, its result never written back before the host's d2h copy reads it (C1). */
    @DpaGlobal("memory_stress_no_writeback")
    static void memoryStressNoWriteback(long unused) {
        long tls = DocaDpaDev.threadGetLocalStorage();
        long c0 = Dpa.cycles();
        long errors = memoryOps(tls);
        report(tls, c0, errors, false);
    }

    /** {@code dpa_nvqual_arithmetic_stress_kernel}: a multiply-add chain kept in DPA memory, checked against a recount. */
    @DpaGlobal("dpa_nvqual_arithmetic_stress_kernel")
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
}
