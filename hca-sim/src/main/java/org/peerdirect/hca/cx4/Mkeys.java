package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;

/**
 * Memory keys ({@code CREATE_MKEY}, {@code DESTROY_MKEY}, {@code QUERY_SPECIAL_CONTEXTS}; the
 * driver side is {@code mlx5_ib}'s {@code mr.c} and {@code mlx5_core}'s {@code mr.c}): MTT mkeys
 * with their translations given, and UMR-enabled MTT or KSM mkeys whose entries UMR work requests
 * write later. The engine keeps the translations (its MPT); the context (64 B) lives in the
 * firmware's pages.
 *
 * <p>Lock rules: the firmware thread alone.
 */
final class Mkeys {

    static final int MKEY_CONTEXT_BYTES = 64;

    private final DataPath dp;
    private final Allocations allocations;
    private final FirmwarePages pages;
    /** mkey index → its context slot (firmware thread only). */
    private final Map<Integer, FirmwarePages.Slot> mkeys = new HashMap<>();

    Mkeys(DataPath dp, Allocations allocations, FirmwarePages pages) {
        this.dp = dp;
        this.allocations = allocations;
        this.pages = pages;
    }

    void register(CommandTable t) {
        t.add(Mlx5Cmd.CREATE_MKEY, CommandTable.withList(Mkey.CREATE_IN_MTT, Mkeys::mttEntries), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> createMkey(in, out));
        t.add(Mlx5Cmd.DESTROY_MKEY, (opMod, in, out) -> destroyMkey(in));
        t.add(Mlx5Cmd.QUERY_SPECIAL_CONTEXTS, CommandTable.MIN_INPUT, Mkey.SPECIAL_CONTEXTS_OUT_LEN, (opMod, in, out) -> {
            // the reserved lkey (bus addresses) is key 0; no dump-fill mkey is built
            out.set(BE32, Mkey.SPECIAL_OUT_RESD_LKEY, 0);
            out.set(BE32, Mkey.SPECIAL_OUT_NULL_MKEY, HcaDevice.NULL_MKEY);
        });
    }

    int count() {
        return mkeys.size();
    }

    /** Force close: every mkey's context dropped (the engine was reset first). */
    void dropAll() {
        mkeys.clear();
    }

    /** The MTT entries a CREATE_MKEY carries: translations_octword_actual_size × 2. */
    static int mttEntries(MemorySegment in) {
        return (int) Math.min(1 << 20, 2L * (in.get(BE32, Mkey.CREATE_IN_OCTWORD_ACTUAL_SIZE) & 0xffff_ffffL));
    }

    /** The {@link HcaDevice}{@code .PERM_*} rights of an mkey context's access bits at {@code m}. */
    static int perm(MemorySegment s, long m) {
        return (Mkey.MKC_LR.get(s, m) != 0 ? HcaDevice.PERM_LOCAL_READ : 0) | (Mkey.MKC_LW.get(s, m) != 0 ? HcaDevice.PERM_LOCAL_WRITE : 0)
                | (Mkey.MKC_RR.get(s, m) != 0 ? HcaDevice.PERM_REMOTE_READ : 0) | (Mkey.MKC_RW.get(s, m) != 0 ? HcaDevice.PERM_REMOTE_WRITE : 0)
                | (Mkey.MKC_A.get(s, m) != 0 ? HcaDevice.PERM_ATOMIC : 0)
                | (Mkey.MKC_FLUSH_GLOBAL.get(s, m) != 0 ? HcaDevice.PERM_FLUSH_GLOBAL : 0)
                | (Mkey.MKC_FLUSH_PERSISTENT.get(s, m) != 0 ? HcaDevice.PERM_FLUSH_PERSISTENT : 0);
    }

    /** The most MTT entries one UMR-enabled mkey may be created with (2^30, a 4 TiB range of 4 KiB pages; the entries are kept in chunks made when first written, so the size costs 8 bytes per 4096 entries until used). */
    static final int MAX_UMR_MTT = 1 << 30;

    void createMkey(MemorySegment in, MemorySegment out) throws Refused, CommandQueue.Deferred {
        long m = Mkey.CREATE_IN_MKC;
        int mode = Mkey.MKC_ACCESS_MODE_1_0.get(in, m) | Mkey.MKC_ACCESS_MODE_4_2.get(in, m) << 2;
        if (mode != Mkey.ACCESS_MODE_MTT && mode != Mkey.ACCESS_MODE_KSM) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "access mode " + mode + ": the model builds MTT (1) and KSM (3) mkeys; "
                    + "PA, KLM and the others are not built");
        }
        if (Mkey.MKC_UMR_EN.get(in, m) != 0) {
            createUmrMkey(in, out, mode == Mkey.ACCESS_MODE_KSM);
            return;
        }
        if (mode == Mkey.ACCESS_MODE_KSM) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "a KSM mkey is built with umr_en only (its entries are written by UMR)");
        }
        if (Mkey.MKC_FREE.get(in, m) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "a free mkey can only be enabled by UMR: it needs umr_en");
        }
        if (Mkey.MKC_LOG_PAGE_SIZE.get(in, m) != 12) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "log_page_size " + Mkey.MKC_LOG_PAGE_SIZE.get(in, m)
                    + ": the model translates 4 KiB pages");
        }
        int pd = Mkey.MKC_PD.get(in, m);
        if (!allocations.pdAllocated(pd)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "pd " + pd + " is not allocated");
        }
        long start = in.get(BE64, m + Mkey.MKC_START_ADDR);
        long len = in.get(BE64, m + Mkey.MKC_LEN);
        if (len <= 0 || start + len < start) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, String.format("mkey of %d bytes at 0x%x", len, start));
        }
        long pages = ((start & 0xfff) + len + 4095) >>> 12;
        int n = mttEntries(in);
        if (n < pages) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "the MTT has " + n + " entries for " + pages + " pages");
        }
        long[] iova = new long[(int) pages];
        long[] length = new long[(int) pages];
        for (int i = 0; i < pages; i++) {
            long e = in.get(BE64, Mkey.CREATE_IN_MTT + 8L * i);
            if ((e & Mkey.MTT_READ) == 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "MTT entry " + i + " is not present (rd_en clear)");
            }
            iova[i] = e & ~0xfffL;
            length[i] = 4096;
        }
        int perm = perm(in, m);
        FirmwarePages.Slot ctx = this.pages.store(MKEY_CONTEXT_BYTES, in, m, 64, "a context");
        int key;
        try {
            key = dp.engine.sw2hwMpt(pd, start, len, perm, iova, length, Mkey.MKC_MKEY_7_0.get(in, m));
        } catch (HwCommandException e) {
            this.pages.free(ctx);
            throw Refused.of(e);
        }
        mkeys.put(Mkey.mkeyToIdx(key), ctx);
        Pages.INDEX24.set(out, 0, Mkey.mkeyToIdx(key));
    }

    /**
     * {@code CREATE_MKEY} with {@code umr_en}: an MTT mkey with {@code translations_octword_size} × 2
     * entries, the first {@code translations_octword_actual_size} × 2 given (an entry without
     * {@code rd_en} is not present), created free or in use; UMR work requests change it later.
     */
    private void createUmrMkey(MemorySegment in, MemorySegment out, boolean ksm) throws Refused, CommandQueue.Deferred {
        long m = Mkey.CREATE_IN_MKC;
        // an octoword holds two MTT entries or one KSM entry
        long capacity = (ksm ? 1L : 2L) * (Mkey.MKC_TRANSLATIONS_OCTWORD_SIZE.get(in, m) & 0xffff_ffffL);
        int n = ksm ? mttEntries(in) / 2 : mttEntries(in);
        if (capacity < 1 || capacity > MAX_UMR_MTT || n > capacity) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, String.format(
                    "translations_octword_size %d (%d %s entries, the model takes 1..%d) with %d entries given", capacity / (ksm ? 1 : 2), capacity,
                    ksm ? "KSM" : "MTT", MAX_UMR_MTT, n));
        }
        if (ksm && n > 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "a KSM mkey is created without entries (" + n
                    + " given): UMR writes them");
        }
        int pd = Mkey.MKC_PD.get(in, m);
        if (!allocations.pdAllocated(pd)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "pd " + pd + " is not allocated");
        }
        long[] mtt = new long[ksm ? 0 : n];
        for (int i = 0; i < mtt.length; i++) {
            long e = in.get(BE64, Mkey.CREATE_IN_MTT + 8L * i);
            mtt[i] = (e & Mkey.MTT_READ) == 0 ? 0 : e;
        }
        FirmwarePages.Slot ctx = pages.store(MKEY_CONTEXT_BYTES, in, m, 64, "a context");
        int key;
        try {
            long len = Mkey.MKC_LENGTH64.get(in, m) != 0 ? Long.MAX_VALUE - in.get(BE64, m + Mkey.MKC_START_ADDR) : in.get(BE64, m + Mkey.MKC_LEN);
            key = dp.engine.createUmrMpt(pd, in.get(BE64, m + Mkey.MKC_START_ADDR), len, perm(in, m), Mkey.MKC_LOG_PAGE_SIZE.get(in, m), (int) capacity,
                    Mkey.MKC_FREE.get(in, m) != 0, mtt, ksm ? 0 : n, Mkey.MKC_MKEY_7_0.get(in, m), ksm);
        } catch (HwCommandException e) {
            pages.free(ctx);
            throw Refused.of(e);
        }
        mkeys.put(Mkey.mkeyToIdx(key), ctx);
        Pages.INDEX24.set(out, 0, Mkey.mkeyToIdx(key));
    }

    void destroyMkey(MemorySegment in) throws Refused {
        int index = Pages.INDEX24.get(in, 0);
        FirmwarePages.Slot ctx = mkeys.remove(index);
        if (ctx == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "mkey index 0x" + Integer.toHexString(index) + " does not exist");
        }
        int key = dp.engine.mptKeyOfIndex(index);
        dp.engine.hw2swMpt(key); // revoked: returns when no DMA through it is in flight
        dp.engine.freeMpt(key);
        pages.free(ctx);
    }
}
