package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;

/**
 * Memory keys ({@code CREATE_MKEY}, {@code DESTROY_MKEY}, {@code QUERY_SPECIAL_CONTEXTS}; the
 * driver side is {@code mlx5_ib}'s {@code mr.c} and {@code mlx5_core}'s {@code mr.c}): MTT mkeys
 * with their translations given (or taken from a DevX umem, {@code mkey_umem_valid}), and
 * UMR-enabled MTT or KSM mkeys whose entries UMR work requests write later. The engine keeps the translations (its MPT); the context (64 B) lives in the
 * firmware's pages.
 *
 * <p>Lock rules: the firmware thread alone.
 */
final class Mkeys {

    static final int MKEY_CONTEXT_BYTES = 64;

    private final DataPath dp;
    private final Allocations allocations;
    private final FirmwarePages pages;
    private final Umems umems;

    /** An mkey's context slot, and the umem range its pages are in (null: its MTT was given). */
    private record Live(FirmwarePages.Slot context, QueueMemory umem) {
    }

    /** mkey index → its context (firmware thread only). */
    private final Map<Integer, Live> mkeys = new HashMap<>();

    Mkeys(DataPath dp, Allocations allocations, FirmwarePages pages, Umems umems) {
        this.dp = dp;
        this.allocations = allocations;
        this.pages = pages;
        this.umems = umems;
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
        if (in.byteSize() >= Mkey.CREATE_IN_MTT && Devx.MKEY_UMEM_VALID.get(in, 0) != 0) {
            return 0; // the pages are the umem's
        }
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
        allocations.usePd(pd);
        long start = in.get(BE64, m + Mkey.MKC_START_ADDR);
        long len = in.get(BE64, m + Mkey.MKC_LEN);
        if (len <= 0 || start + len < start) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, String.format("mkey of %d bytes at 0x%x", len, start));
        }
        long pages = ((start & 0xfff) + len + 4095) >>> 12;
        if (pages > Integer.MAX_VALUE / 2) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, String.format("an mkey of %d bytes: too many pages", len));
        }
        long[] iova = new long[(int) pages];
        long[] length = new long[(int) pages];
        java.util.Arrays.fill(length, 4096);
        QueueMemory umem = Devx.MKEY_UMEM_VALID.get(in, 0) != 0 ? umemPages(in, start, len, iova) : null;
        if (umem == null) {
            mttPages(in, iova);
        }
        int perm = perm(in, m);
        FirmwarePages.Slot ctx;
        int key;
        try {
            ctx = this.pages.store(MKEY_CONTEXT_BYTES, in, m, 64, "a context");
            try {
                key = dp.engine.sw2hwMpt(pd, start, len, perm, iova, length, Mkey.MKC_MKEY_7_0.get(in, m), umem == null ? null : umem.space());
            } catch (HwCommandException e) {
                this.pages.free(ctx);
                throw Refused.of(e);
            }
        } catch (Refused | CommandQueue.Deferred e) {
            if (umem != null) {
                umem.release();
            }
            throw e;
        }
        mkeys.put(Mkey.mkeyToIdx(key), new Live(ctx, umem));
        allocations.uctxs.own(Uctxs.Kind.MKEY, Mkey.mkeyToIdx(key));
        Pages.INDEX24.set(out, 0, Mkey.mkeyToIdx(key));
    }

    /** The pages of an MTT mkey from its translation list, one present entry per page. */
    private static void mttPages(MemorySegment in, long[] iova) throws Refused {
        int n = mttEntries(in);
        if (n < iova.length) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "the MTT has " + n + " entries for " + iova.length + " pages");
        }
        for (int i = 0; i < iova.length; i++) {
            long e = in.get(BE64, Mkey.CREATE_IN_MTT + 8L * i);
            if ((e & Mkey.MTT_READ) == 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_MKEY, "MTT entry " + i + " is not present (rd_en clear)");
            }
            iova[i] = e & ~0xfffL;
        }
    }

    /**
     * The pages of an mkey over {@code mkey_umem_id} from {@code mkey_umem_offset}
     * ({@code flexio_device_mkey_create}, {@code mlx5dv_devx_umem} MRs): the umem byte at the
     * offset is the mkey's byte at {@code start}, so both have the same place in their page.
     * The range is held until the mkey goes. A DUMEM's pages are DPA addresses: the mkey addresses
     * the DPA memory ({@link QueueMemory#space}), and RDMA through it never crosses the IOMMU.
     */
    private QueueMemory umemPages(MemorySegment in, long start, long len, long[] iova) throws Refused {
        Umems.Umem u = umems.umem(in.get(BE32, Devx.MKEY_UMEM_ID), "CREATE_MKEY");
        long offset = in.get(BE64, Devx.MKEY_UMEM_OFFSET);
        if (offset < 0 || ((u.pageOffset + offset - start) & 0xfff) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM, String.format(
                    "mkey_umem_offset 0x%x of umem %d is not at start_addr 0x%x's place in its page", offset, u.id, start));
        }
        QueueMemory r = u.region(offset, len, "the mkey of " + len + " bytes");
        long first = offset - (start & 0xfff); // the umem byte at the mkey's first page
        for (int i = 0; i < iova.length; i++) {
            iova[i] = u.address(first + 4096L * i) & ~0xfffL; // page_offset + first is a page boundary, at least 0
        }
        return r;
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
        allocations.usePd(pd);
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
        mkeys.put(Mkey.mkeyToIdx(key), new Live(ctx, null));
        allocations.uctxs.own(Uctxs.Kind.MKEY, Mkey.mkeyToIdx(key));
        Pages.INDEX24.set(out, 0, Mkey.mkeyToIdx(key));
    }

    void destroyMkey(MemorySegment in) throws Refused {
        int index = Pages.INDEX24.get(in, 0);
        Live live = mkeys.get(index);
        if (live == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "mkey index 0x" + Integer.toHexString(index) + " does not exist");
        }
        allocations.uctxs.check(Uctxs.Kind.MKEY, index, "mkey index 0x" + Integer.toHexString(index));
        mkeys.remove(index);
        allocations.uctxs.release(Uctxs.Kind.MKEY, index);
        int key = dp.engine.mptKeyOfIndex(index);
        dp.engine.hw2swMpt(key); // revoked: returns when no DMA through it is in flight
        dp.engine.freeMpt(key);
        pages.free(live.context());
        if (live.umem() != null) {
            live.umem().release(); // after the revoke: no DMA reaches the umem through it any more
        }
    }
}
