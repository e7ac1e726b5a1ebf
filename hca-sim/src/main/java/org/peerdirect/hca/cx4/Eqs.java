package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The event queues ({@code CREATE_EQ}, {@code DESTROY_EQ}, {@code QUERY_EQ}, {@code GEN_EQE}; the
 * driver side is {@code mlx5_core}'s {@code eq.c}) and the posting of events: each event type goes
 * to the lowest-numbered EQ subscribed to it, and an armed EQ raises its MSI-X vector.
 *
 * <p>Lock rules: the firmware thread alone changes the table; {@link #eq}, {@link #eqFor} and
 * {@link #postEvent} run on any thread (the BAR write handler, the engine's threads): the table is
 * an atomic array and an EQ guards its own ring state.
 */
final class Eqs {

    /** EQ context: the EQC and the event bitmask, in the firmware's pages. */
    static final int EQ_CONTEXT_BYTES = 1024;

    private final DmaPort port;
    private final PciFunction fn;
    private final Caps caps;
    private final Allocations allocations;
    private final FirmwarePages pages;
    private final AtomicReferenceArray<HwEq> eqs;
    /** Told when an EQ taking page-fault events (0x0C) is created or destroyed (the page-fault unit). */
    private Runnable pageFaultEqsChanged = () -> {
    };

    Eqs(PciFunction fn, DmaPort port, Caps caps, Allocations allocations, FirmwarePages pages) {
        this.fn = fn;
        this.port = port;
        this.caps = caps;
        this.allocations = allocations;
        this.pages = pages;
        this.eqs = new AtomicReferenceArray<>(1 << caps.max(HcaCap.LOG_MAX_EQ));
    }

    void register(CommandTable t) {
        t.add(Mlx5Cmd.CREATE_EQ, CommandTable.withList(Eq.CREATE_EQ_IN_PAS, Eqs::eqPages), CommandTable.MIN_OUTPUT, false,
                (opMod, in, out) -> create(in, out));
        t.add(Mlx5Cmd.DESTROY_EQ, (opMod, in, out) -> destroy(in));
        t.add(Mlx5Cmd.QUERY_EQ, CommandTable.MIN_INPUT, Eq.QUERY_EQ_OUT_LEN, (opMod, in, out) -> query(in, out));
        t.add(Mlx5Cmd.GEN_EQE, Eq.GEN_EQE_IN_LEN, CommandTable.MIN_OUTPUT, (opMod, in, out) -> generate(in));
    }

    /** Set once while the firmware is built. */
    void onPageFaultEqsChanged(Runnable r) {
        pageFaultEqsChanged = r;
    }

    /** The function whose MSI-X vectors the EQs raise. */
    PciFunction function() {
        return fn;
    }

    /** The EQ with this number, or null (any thread). */
    HwEq eq(int eqn) {
        return eqn >= 0 && eqn < eqs.length() ? eqs.get(eqn) : null;
    }

    /** The EQ a UAR page rings, or -1. */
    int eqOfUar(int uar) {
        for (int i = 0; i < eqs.length(); i++) {
            HwEq e = eqs.get(i);
            if (e != null && e.uarPage == uar) {
                return i;
            }
        }
        return -1;
    }

    /** EQEs dropped on full rings and EQE writes the IOMMU stopped, over every live EQ. */
    long overruns() {
        long n = 0;
        for (int i = 0; i < eqs.length(); i++) {
            HwEq e = eqs.get(i);
            n += e == null ? 0 : e.overruns() + e.dmaFaults();
        }
        return n;
    }

    int count() {
        int n = 0;
        for (int i = 0; i < eqs.length(); i++) {
            n += eqs.get(i) == null ? 0 : 1;
        }
        return n;
    }

    /** Teardown: every EQ gone (their contexts' pages are freed with the rest). */
    void clear() {
        for (int i = 0; i < eqs.length(); i++) {
            eqs.set(i, null);
        }
    }

    /** The EQ an event type goes to (the lowest-numbered one subscribed), or null. */
    HwEq eqFor(int eventType) {
        for (int i = 0; i < eqs.length(); i++) {
            HwEq e = eqs.get(i);
            if (e != null && e.wants(eventType)) {
                return e;
            }
        }
        return null;
    }

    /**
     * Posts an event on the EQ subscribed to its type (raising its vector when armed); false when
     * no EQ takes the type or the EQE was lost (ring full).
     */
    boolean postEvent(int type, int subType, MemorySegment data) {
        HwEq e = eqFor(type);
        if (e == null) {
            return false;
        }
        int r = e.postOrDrop(port, type, subType, data);
        if (r == HwEq.RAISE) {
            e.raise(fn);
        }
        return r != HwEq.DROPPED;
    }

    /** Posts an event on EQ {@code eqn} itself (a completion on its CQ's EQ), raising its vector when armed; dropped when the EQ is gone. */
    void postTo(int eqn, int type, MemorySegment data) {
        HwEq eq = eq(eqn);
        if (eq != null && eq.post(port, type, 0, data)) {
            eq.raise(fn);
        }
    }

    static int eqPages(MemorySegment in) {
        long c = Eq.CREATE_EQ_IN_EQC;
        long bytes = (long) Eq.EQE_SIZE << Math.min(31, Eq.EQC_LOG_EQ_SIZE.get(in, c));
        long page = 4096L << Math.min(20, Eq.EQC_LOG_PAGE_SIZE.get(in, c));
        return (int) Math.min(1 << 20, (bytes + page - 1) / page);
    }

    private HwEq liveEq(int eqn) throws Refused {
        HwEq e = eq(eqn);
        if (e == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "EQ " + eqn + " does not exist");
        }
        return e;
    }

    private void create(MemorySegment in, MemorySegment out) throws Refused, CommandQueue.Deferred {
        long c = Eq.CREATE_EQ_IN_EQC;
        int logSize = Eq.EQC_LOG_EQ_SIZE.get(in, c);
        int lps = Eq.EQC_LOG_PAGE_SIZE.get(in, c);
        int uar = Eq.EQC_UAR_PAGE.get(in, c);
        int intr = Eq.EQC_INTR.get(in, c);
        if (logSize > caps.cur(HcaCap.LOG_MAX_EQ_SZ)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_EQ, "log_eq_size " + logSize + " is above log_max_eq_sz");
        }
        if (lps != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_EQ, "log_page_size " + lps + ": the model takes 4 KiB EQ pages");
        }
        if (!allocations.uarAllocated(uar)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "uar_page " + uar + " is not allocated");
        }
        if (intr >= fn.msixVectors()) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_EQ, "intr " + intr + ": the function has " + fn.msixVectors() + " MSI-X vectors");
        }
        int n = eqPages(in);
        long[] pas = new long[n];
        for (int i = 0; i < n; i++) {
            pas[i] = in.get(BE64, Eq.CREATE_EQ_IN_PAS + 8L * i);
            if ((pas[i] & 0xfff) != 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_PAGE, String.format("pas[%d] 0x%x is not 4 KiB aligned", i, pas[i]));
            }
        }
        int eqn = -1;
        for (int i = 0; i < eqs.length(); i++) {
            if (eqs.get(i) == null) {
                eqn = i;
                break;
            }
        }
        if (eqn < 0) {
            throw new Refused(Mlx5Cmd.STAT_LIM_ERR, Syndromes.SYND_LIMIT, "all " + eqs.length() + " EQs exist (log_max_eq)");
        }
        // the context lives in the firmware's pages: written there by DMA, read back by QUERY_EQ
        MemorySegment ctxBytes = MemorySegment.ofArray(new byte[Eq.EQC_SIZE + 8]);
        MemorySegment.copy(in, c, ctxBytes, 0, Eq.EQC_SIZE);
        MemorySegment.copy(in, Eq.CREATE_EQ_IN_EVENT_BITMASK, ctxBytes, Eq.EQC_SIZE, 8);
        FirmwarePages.Slot ctx = pages.store(EQ_CONTEXT_BYTES, ctxBytes, 0, ctxBytes.byteSize(), "the EQ's context");
        long mask = in.get(BE64, Eq.CREATE_EQ_IN_EVENT_BITMASK);
        eqs.set(eqn, new HwEq(eqn, logSize, pas, uar, intr, mask, ctx));
        out.set(ValueLayout.JAVA_BYTE, Eq.CREATE_EQ_OUT_EQN, (byte) eqn);
        if ((mask & 1L << Eq.EVENT_PAGE_FAULT) != 0) {
            pageFaultEqsChanged.run();
        }
    }

    private void destroy(MemorySegment in) throws Refused {
        HwEq e = liveEq(in.get(ValueLayout.JAVA_BYTE, Eq.EQN_IN) & 0xff);
        eqs.set(e.eqn, null);
        pages.free(e.context);
        if (e.wants(Eq.EVENT_PAGE_FAULT)) {
            pageFaultEqsChanged.run();
        }
    }

    private void query(MemorySegment in, MemorySegment out) throws Refused {
        HwEq e = liveEq(in.get(ValueLayout.JAVA_BYTE, Eq.EQN_IN) & 0xff);
        try { // the context as the firmware keeps it, read back from its page
            port.read(e.context.addr(), out, Eq.CREATE_EQ_IN_EQC, Eq.EQC_SIZE);
            port.read(e.context.addr() + Eq.EQC_SIZE, out, Eq.CREATE_EQ_IN_EVENT_BITMASK, 8);
        } catch (IommuFault f) {
            throw new Refused(Mlx5Cmd.STAT_INT_ERR, Syndromes.SYND_BAD_PAGE, "the EQ's context page is no longer mapped for the device");
        }
        Eq.EQC_ST.set(out, Eq.CREATE_EQ_IN_EQC, e.state());
        Eq.EQC_CONSUMER_COUNTER.set(out, Eq.CREATE_EQ_IN_EQC, e.consumer() & 0xff_ffff);
        Eq.EQC_PRODUCER_COUNTER.set(out, Eq.CREATE_EQ_IN_EQC, e.producer() & 0xff_ffff);
    }

    /** {@code GEN_EQE}: the driver's EQE posted as given on the EQ it names. */
    private void generate(MemorySegment in) throws Refused {
        HwEq e = liveEq(in.get(ValueLayout.JAVA_BYTE, Eq.EQN_IN) & 0xff);
        MemorySegment eqe = in.asSlice(Eq.GEN_EQE_IN_EQE, Eq.EQE_SIZE);
        if (e.post(port, eqe.get(ValueLayout.JAVA_BYTE, Eq.EQE_TYPE) & 0xff, eqe.get(ValueLayout.JAVA_BYTE, Eq.EQE_SUB_TYPE) & 0xff,
                eqe.asSlice(Eq.EQE_DATA, 28))) {
            e.raise(fn);
        }
    }
}
