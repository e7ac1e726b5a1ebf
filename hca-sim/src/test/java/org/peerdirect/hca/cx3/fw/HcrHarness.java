package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.peerdirect.hca.cx3.ConnectX3Board;
import org.peerdirect.hca.cx3.ifc.EqContext;
import org.peerdirect.hca.cx3.ifc.Hcr;
import org.peerdirect.hca.cx3.ifc.IcmMap;
import org.peerdirect.hca.cx3.ifc.InitHca;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Mtt;
import org.peerdirect.hca.cx3.ifc.QueryFw;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * A ConnectX-3 on a bus of its own, driven from the driver's side only: DMA pages mapped through
 * the function's IOMMU domain, the HCR written and polled through BAR0 with the toggle protocol,
 * a bring-up to a chosen level. {@link #close} resets the chip, unmaps and frees every page and
 * audits: no IOMMU violation (faults of DMA to unmapped addresses are expected), no mapping left,
 * every frame free, no BAR write handler that threw.
 */
final class HcrHarness implements AutoCloseable {

    /** A DMA page of the harness: frame, bus address, the CPU's view. */
    record Page(long pfn, long iova, MemorySegment mem) {
    }

    static final long BOUND_NANOS = TimeUnit.SECONDS.toNanos(5);
    /** Where the harness lays the MTT table in ICM, and the EQ it creates. */
    static final long MTT_BASE = 0x10_0000;
    static final long ICM_SIZE = 0x40_0000;
    static final int EQN = 4;

    final Mm mm;
    final Iommu iommu;
    final StandalonePciBus bus;
    final ConnectX3Board board;
    final PciFunction fn;
    private final List<Page> pages = new ArrayList<>();
    private int toggle = 1;
    /** The EQ ring (when the bring-up created one), and its consumer index. */
    Page eqRing;

    HcrHarness(Path tmp) {
        mm = new Mm(32L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        board = ConnectX3Board.onFabric(0, new Fabric(), 1);
        fn = bus.register(board.spec());
    }

    Page page() {
        long pfn = mm.allocPages(0);
        long iova = fn.dma().dmaMapPage(pfn, DmaDirection.BIDIRECTIONAL);
        MemorySegment mem = mm.pageAddress(pfn, 0);
        mem.fill((byte) 0);
        Page p = new Page(pfn, iova, mem);
        pages.add(p);
        return p;
    }

    /**
     * Posts one command and waits for its completion (go clear, toggle moved); returns the status,
     * or throws when the HCR does not complete within the bound (a hung device).
     */
    int run(int op, int opMod, long inParam, int inMod, long outParam, int token, boolean event) {
        long b = Hcr.BASE;
        int w = fn.read32be(0, b + Hcr.STATUS);
        if (Hcr.go(w) || Hcr.toggle(w) == toggle) {
            throw new AssertionError(String.format("the HCR is still busy before %s: 0x%08x", Mlx4Cmd.name(op), w));
        }
        fn.write32be(0, b + Hcr.IN_PARAM, (int) (inParam >>> 32));
        fn.write32be(0, b + Hcr.IN_PARAM + 4, (int) inParam);
        fn.write32be(0, b + Hcr.IN_MODIFIER, inMod);
        fn.write32be(0, b + Hcr.OUT_PARAM, (int) (outParam >>> 32));
        fn.write32be(0, b + Hcr.OUT_PARAM + 4, (int) outParam);
        fn.write32be(0, b + Hcr.TOKEN, token << 16);
        fn.write32be(0, b + Hcr.STATUS, Hcr.goWord(op, opMod, event, toggle));
        toggle ^= 1;
        long deadline = System.nanoTime() + BOUND_NANOS;
        for (;;) {
            w = fn.read32be(0, b + Hcr.STATUS);
            if (!Hcr.go(w) && Hcr.toggle(w) != toggle) {
                return Hcr.status(w);
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError(String.format("%s op_mod 0x%x in_mod 0x%x did not complete within %d s: HCR 0x%08x (%s)", Mlx4Cmd.name(op), opMod,
                        inMod, BOUND_NANOS / 1_000_000_000L, w, board.describe()));
            }
            Thread.onSpinWait();
        }
    }

    long outParam() {
        return (long) fn.read32be(0, Hcr.BASE + Hcr.OUT_PARAM) << 32 | fn.read32be(0, Hcr.BASE + Hcr.OUT_PARAM + 4) & 0xffff_ffffL;
    }

    int ok(int op, int opMod, long inParam, int inMod, long outParam) {
        int s = run(op, opMod, inParam, inMod, outParam, Hcr.POLL_TOKEN, false);
        if (s != 0) {
            throw new AssertionError(Mlx4Cmd.name(op) + " failed with " + Mlx4Cmd.statusName(s) + ": " + board.lastRefusal());
        }
        return s;
    }

    /** MAP_FA / MAP_ICM_AUX / MAP_ICM of {@code n} fresh pages at ICM {@code virt} (-1: none). */
    List<Page> map(int op, int n, long virt) {
        Page box = page();
        List<Page> ps = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Page p = page();
            ps.add(p);
            box.mem().set(BE64, (long) i * IcmMap.ENTRY_SIZE + IcmMap.VIRT, virt < 0 ? -1 : virt + 4096L * i);
            box.mem().set(BE64, (long) i * IcmMap.ENTRY_SIZE + IcmMap.PHYS, p.iova());
        }
        ok(op, 0, box.iova(), n, 0);
        return ps;
    }

    /** Levels: 0 reset, 1 firmware running, 2 HCA up with the MTT's first ICM page, 3 plus an EQ taking command completions and a port up. */
    void bringUp(int level) {
        if (level < 1) {
            return;
        }
        Page out = page();
        ok(Mlx4Cmd.QUERY_FW, 0, 0, 0, out.iova());
        int fwPages = out.mem().get(BE16, QueryFw.FW_PAGES) & 0xffff;
        map(Mlx4Cmd.MAP_FA, fwPages, -1);
        ok(Mlx4Cmd.RUN_FW, 0, 0, 0, 0);
        if (level < 2) {
            return;
        }
        ok(Mlx4Cmd.QUERY_DEV_CAP, 0, 0, 0, out.iova());
        run(Mlx4Cmd.SET_ICM_SIZE, 0, ICM_SIZE, 0, 0, Hcr.POLL_TOKEN, false);
        map(Mlx4Cmd.MAP_ICM_AUX, (int) outParam(), -1);
        Page in = page();
        MemorySegment m = in.mem();
        m.set(U8, InitHca.VERSION, (byte) InitHca.VERSION_2);
        for (int off : new int[] {InitHca.QPC_BASE, InitHca.SRQC_BASE, InitHca.CQC_BASE, InitHca.EQC_BASE, InitHca.DMPT_BASE}) {
            m.set(BE64, off, 0);
        }
        m.set(BE64, InitHca.MTT_BASE, MTT_BASE);
        ok(Mlx4Cmd.INIT_HCA, 0, in.iova(), 0, 0);
        map(Mlx4Cmd.MAP_ICM, 16, MTT_BASE);
        if (level < 3) {
            return;
        }
        eqRing = page();
        for (long off = 31; off < 4096; off += 32) {
            eqRing.mem().set(U8, off, (byte) 0x80);
        }
        Page mtt = page();
        mtt.mem().set(BE64, Mtt.WRITE_START, 0);
        mtt.mem().set(BE64, Mtt.WRITE_ENTRIES, eqRing.iova() | Mtt.PRESENT);
        ok(Mlx4Cmd.WRITE_MTT, 0, mtt.iova(), 1, 0);
        Page ctx = page();
        ctx.mem().set(U8, EqContext.LOG_EQ_SIZE, (byte) 7);
        ctx.mem().set(U8, EqContext.INTR, (byte) 0);
        ok(Mlx4Cmd.SW2HW_EQ, 0, ctx.iova(), EQN, 0);
        ok(Mlx4Cmd.MAP_EQ, 0, 1L << Mlx4Cmd.EVENT_CMD | 1L << Mlx4Cmd.EVENT_PORT_CHANGE, EQN, 0);
        ok(Mlx4Cmd.INIT_PORT, 0, 0, 1, 0);
    }

    /** The chip reset through BAR0 (the HCR idle, the toggle protocol starting again). */
    void reset() {
        fn.write32be(0, Hcr.RESET, Hcr.RESET_VALUE);
        toggle = 1;
    }

    @Override
    public void close() {
        reset(); // the device forgets every page it was lent and writes nothing more
        for (Page p : pages) {
            fn.dma().dmaUnmap(p.iova(), 1);
            mm.freePages(p.pfn(), 0);
        }
        bus.close(); // the function leaves the bus, the model powers down with it
        IommuAudit a = iommu.audit();
        check(a.violationFree(), "no IOMMU violation (faults are expected, use-after-free and frees while mapped are not): " + a);
        check(a.liveMappings() == 0, "no mapping left: " + a);
        check(mm.totalFrames() == mm.freeFrames(), "every frame free: " + (mm.totalFrames() - mm.freeFrames()) + " in use");
        check(bus.warnings().isEmpty(), "no BAR write handler threw: " + bus.warnings());
        mm.close();
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }
}
