package org.peerdirect.hca.cx4;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * The pages the driver gave the firmware ({@code MANAGE_PAGES}): boot pages for the firmware's
 * own use, init pages and regular pages for its context tables (ICM). Contexts are written into
 * these pages by DMA through the function's IOMMU domain, so a page the driver unmapped while
 * the firmware still held it is an IOMMU fault, never a silent write.
 *
 * <p>Accounting, as {@code QUERY_PAGES} reports it: the first {@link #BOOT_PAGES} pages given are
 * boot pages, the next {@link #INIT_PAGES} init pages, every later one a regular page. After
 * {@code INIT_HCA} the firmware keeps between {@link #LOW_WATER} and {@link #HIGH_WATER} free
 * 64-byte context units (measured in pages), asking for more with a page-request event when it
 * falls below and returning whole free regular pages when more than {@link #SURPLUS} lie idle.
 *
 * <p>Lock rules: owned by the firmware thread; no locking.
 */
final class FirmwarePages {

    enum Kind {
        BOOT, INIT, REGULAR
    }

    static final int BOOT_PAGES = 4;
    static final int INIT_PAGES = 2;
    /** Context allocation unit (bytes) and units per 4 KiB page. */
    static final int UNIT = 64;
    static final int UNITS = Pages.ADAPTER_PAGE_SIZE / UNIT;
    /** Free context space the firmware keeps after INIT_HCA, in pages: ask below LOW, up to HIGH. */
    static final int LOW_WATER = 2;
    static final int HIGH_WATER = 4;
    /** Free regular pages above which the firmware gives pages back. */
    static final int SURPLUS = 4;

    /** No free context space: the command waits for pages (or fails when none can come). */
    static final class Exhausted extends Exception {
        Exhausted() {
            super("firmware context pages exhausted", null, false, false);
        }
    }

    private static final class Page {
        final long addr;
        final Kind kind;
        final BitSet used = new BitSet(UNITS);

        Page(long addr, Kind kind) {
            this.addr = addr;
            this.kind = kind;
        }
    }

    /** A context's place: {@code units} 64-byte units at {@code addr}. */
    record Slot(long addr, int units) {
    }

    private final DmaPort port;
    private final Map<Long, Page> byAddr = new HashMap<>();
    private final List<Page> pages = new ArrayList<>();
    private final MemorySegment zero = MemorySegment.ofArray(new byte[Pages.ADAPTER_PAGE_SIZE]);
    private int boot;
    private int init;
    private int regular;
    /** Pages asked for by the outstanding page request (> 0 give, < 0 take back); 0 none outstanding. */
    private int requested;
    private boolean refused;

    FirmwarePages(DmaPort port) {
        this.port = port;
    }

    /**
     * Whether a command short of firmware pages may be parked for a page request (set by the
     * firmware loop before each command: false when no page request can be delivered or the pages were refused).
     */
    boolean mayDefer;

    /**
     * A context of {@code bytes} in the firmware's pages, written there by DMA from {@code len}
     * bytes of {@code src} at {@code off}. Short of pages the command is parked for a page request
     * while one can be answered ({@link #mayDefer}), refused otherwise; {@code what} names the
     * context in the refusal.
     */
    Slot store(int bytes, MemorySegment src, long off, long len, String what) throws Refused, CommandQueue.Deferred {
        Slot s;
        try {
            s = alloc(bytes);
        } catch (Exhausted e) {
            if (mayDefer) {
                throw new CommandQueue.Deferred(); // parked until the driver answers the page request
            }
            throw new Refused(Mlx5Cmd.STAT_NO_RES_ERR, Syndromes.SYND_NO_PAGES, "no firmware page free for " + what + " and none can be asked for");
        }
        try {
            port.write(s.addr(), src, off, len);
        } catch (IommuFault f) {
            free(s);
            throw new Refused(Mlx5Cmd.STAT_INT_ERR, Syndromes.SYND_BAD_PAGE, "a firmware page is no longer mapped for the device");
        }
        return s;
    }

    /** A QUERY command's context: read back by DMA from the firmware page it was kept in. */
    void load(Slot slot, MemorySegment out, long at, long size, String what) throws Refused {
        try {
            port.read(slot.addr(), out, at, size);
        } catch (IommuFault f) {
            throw new Refused(Mlx5Cmd.STAT_INT_ERR, Syndromes.SYND_BAD_PAGE, "the " + what + "'s context page is no longer mapped for the device");
        }
    }

    int held(Kind k) {
        return switch (k) {
            case BOOT -> boot;
            case INIT -> init;
            case REGULAR -> regular;
        };
    }

    int held() {
        return pages.size();
    }

    /** {@code QUERY_PAGES}: pages still wanted of a kind (regular: the current request, signed). */
    int query(Kind k) {
        return switch (k) {
            case BOOT -> BOOT_PAGES - boot;
            case INIT -> INIT_PAGES - init;
            case REGULAR -> requested;
        };
    }

    /**
     * Takes pages given by the driver: each address 4 KiB aligned, not already held, and mapped for
     * the function (the firmware clears it by DMA). All or none are taken.
     *
     * @return null, or what is wrong with the list
     */
    String give(long[] addrs) {
        for (int i = 0; i < addrs.length; i++) {
            long a = addrs[i];
            if ((a & Pages.ADAPTER_PAGE_SIZE - 1) != 0) {
                return String.format("pas[%d] 0x%x is not 4 KiB aligned", i, a);
            }
            if (byAddr.containsKey(a)) {
                return String.format("pas[%d] 0x%x is already held by the firmware", i, a);
            }
            for (int j = 0; j < i; j++) {
                if (addrs[j] == a) {
                    return String.format("pas[%d] 0x%x is given twice", i, a);
                }
            }
        }
        for (int i = 0; i < addrs.length; i++) {
            try {
                port.write(addrs[i], zero, 0, Pages.ADAPTER_PAGE_SIZE);
            } catch (IommuFault f) {
                return String.format("pas[%d] 0x%x is not mapped for the device", i, addrs[i]);
            }
        }
        for (long a : addrs) {
            Kind k = boot < BOOT_PAGES ? Kind.BOOT : init < INIT_PAGES ? Kind.INIT : Kind.REGULAR;
            Page p = new Page(a, k);
            pages.add(p);
            byAddr.put(a, p);
            count(k, 1);
        }
        if (requested > 0) {
            requested = Math.max(0, requested - addrs.length);
        }
        refused = false;
        return null;
    }

    private void count(Kind k, int d) {
        switch (k) {
            case BOOT -> boot += d;
            case INIT -> init += d;
            case REGULAR -> regular += d;
        }
    }

    /** The driver could not give what was asked ({@code MANAGE_PAGES CANT_GIVE}). */
    void cantGive() {
        requested = 0;
        refused = true;
    }

    /** Whether the driver said it cannot give pages since it last gave some. */
    boolean refused() {
        return refused;
    }

    /**
     * Gives back up to {@code max} pages that hold nothing: regular pages only while the HCA is
     * initialised (boot and init pages carry the firmware's state), every page after teardown.
     * Latest given first.
     */
    long[] take(int max, boolean initialised) {
        List<Long> out = new ArrayList<>();
        for (int i = pages.size() - 1; i >= 0 && out.size() < max; i--) {
            Page p = pages.get(i);
            if (p.used.isEmpty() && (!initialised || p.kind == Kind.REGULAR)) {
                pages.remove(i);
                byAddr.remove(p.addr);
                count(p.kind, -1);
                out.add(p.addr);
            }
        }
        if (requested < 0) {
            requested = Math.min(0, requested + out.size());
        }
        return out.stream().mapToLong(Long::longValue).toArray();
    }

    /** A context of {@code bytes} (rounded up to a power of two of units) in an init or regular page. */
    Slot alloc(int bytes) throws Exhausted {
        int n = Integer.highestOneBit(Math.max(1, (bytes + UNIT - 1) / UNIT) * 2 - 1);
        for (Page p : pages) {
            if (p.kind == Kind.BOOT) {
                continue;
            }
            for (int u = 0; u + n <= UNITS; u += n) {
                int next = p.used.nextSetBit(u);
                if (next < 0 || next >= u + n) {
                    p.used.set(u, u + n);
                    return new Slot(p.addr + (long) u * UNIT, n);
                }
            }
        }
        throw new Exhausted();
    }

    void free(Slot s) {
        Page p = byAddr.get(s.addr() & ~(long) (Pages.ADAPTER_PAGE_SIZE - 1));
        if (p != null) {
            int u = (int) (s.addr() - p.addr) / UNIT;
            p.used.clear(u, u + s.units());
        }
    }

    /** Drops every context (teardown): every page holds nothing. */
    void freeAll() {
        for (Page p : pages) {
            p.used.clear();
        }
    }

    /** 64-byte units holding contexts in the init and regular pages (tests: what the live objects take). */
    int usedUnits() {
        int n = 0;
        for (Page p : pages) {
            if (p.kind != Kind.BOOT) {
                n += p.used.cardinality();
            }
        }
        return n;
    }

    private int freeUnits() {
        int f = 0;
        for (Page p : pages) {
            if (p.kind != Kind.BOOT) {
                f += UNITS - p.used.cardinality();
            }
        }
        return f;
    }

    /**
     * The page request the firmware should raise now, or 0: more pages when the free context
     * space fell below the low water mark, some back when too many regular pages lie idle. Only one
     * request is outstanding at a time; it is recorded as outstanding.
     */
    int request() {
        if (requested != 0) {
            return 0;
        }
        int free = freeUnits();
        if (free < LOW_WATER * UNITS) {
            requested = (HIGH_WATER * UNITS - free + UNITS - 1) / UNITS;
            return requested;
        }
        int idle = 0;
        for (Page p : pages) {
            if (p.kind == Kind.REGULAR && p.used.isEmpty()) {
                idle++;
            }
        }
        if (idle > SURPLUS) {
            requested = -(idle - HIGH_WATER);
            return requested;
        }
        return 0;
    }

    /** Forgets the outstanding request (the function was disabled). */
    void resetRequest() {
        requested = 0;
    }
}
