package org.peerdirect.mlx4.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx3.ifc.Eqe;
import org.peerdirect.hca.cx3.ifc.Hcr;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * {@code struct mlx4_dev} with {@code main.c}'s bring-up and teardown of one ConnectX-3, reached
 * through its PCI function only: {@link #load} is {@code mlx4_load_one} (the chip reset, QUERY_FW, MAP_FA,
 * RUN_FW, QUERY_DEV_CAP, SET_ICM_SIZE, MAP_ICM_AUX, INIT_HCA, QUERY_ADAPTER, the EQs and MAP_EQ,
 * the switch to event mode, a NOP through it, INIT_PORT), {@link #unload} is
 * {@code mlx4_unload_one} in the reverse order, and {@link #enterErrorState} is what a surprise
 * removal leaves ({@code mlx4_enter_error_state}: the chip reset, the driver's memory back).
 * The EQ interrupt handlers hand events to the registered {@link Events} ({@code mlx4_ib}).
 *
 * <p>Lock rules: load and unload run on the binding thread, once each; the EQ handlers run on
 * their vectors' threads and read only final state set before the EQs were armed.
 */
public final class Mlx4Dev {

    /** What {@code mlx4_ib} receives from the EQs ({@code mlx4_cq_completion}, {@code mlx4_qp_event}, ...). */
    public interface Events {
        void cqCompletion(int cqn);

        void cqError(int cqn);

        /** A QP's affiliated event, {@code type} an {@code enum mlx4_event} code. */
        void qpEvent(int qpn, int type);

        void srqEvent(int srqn, int type);

        void portChange(int port, boolean active);
    }

    /** The EQ vectors: the async EQ (events and command completions) and the completion EQ. */
    static final int ASYNC_VECTOR = 0;
    static final int COMP_VECTOR = 1;
    static final int ASYNC_EQ_SIZE = 1024;
    static final int COMP_EQ_SIZE = 4096;
    /** MTT entries this driver uses ({@code num_mtts}). */
    static final int LOG_NUM_MTTS = 20;

    public final String name;
    public final PciFunction fn;
    public final DmaCoherentPages dma;
    public final Cmd cmd;
    public final Fw fw;
    public final Icm icm;
    public Mtt mtt;
    public Mr mr;
    private Fw.FwInfo fwInfo;
    private Fw.DevCap caps;
    private String boardId = "";
    private Eq asyncEq;
    private Eq compEq;
    private boolean hcaUp;
    private volatile Events events;
    private volatile boolean loaded;

    public Mlx4Dev(String name, PciFunction fn, Mm mm, long cmdTimeoutNanos) {
        this.name = name;
        this.fn = fn;
        this.dma = new DmaCoherentPages(mm, fn.dma());
        this.cmd = new Cmd(name, fn, cmdTimeoutNanos);
        this.fw = new Fw(cmd, dma);
        this.icm = new Icm(cmd, fw, dma);
    }

    public void setEvents(Events e) {
        events = e;
    }

    public Fw.FwInfo fwInfo() {
        return fwInfo;
    }

    public Fw.DevCap caps() {
        return caps;
    }

    public String boardId() {
        return boardId;
    }

    public boolean loaded() {
        return loaded;
    }

    /** {@code mlx4_load_one}; on failure everything done so far is undone and the error thrown. */
    public void load() {
        try {
            // mlx4_reset: whatever a driver before this one left (lent memory, EQs, the HCR's
            // toggle) is gone; the HCR's toggle reads 0, the one this driver's first post flips
            fn.write32be(0, Hcr.RESET, Hcr.RESET_VALUE);
            fwInfo = fw.queryFw();
            icm.mapFaAndRun(fwInfo.fwPages());
            caps = fw.queryDevCap();
            initHca();
            boardId = fw.queryAdapter();
            setupEqs();
            cmd.useEvents(fwInfo.maxCmds());
            cmd.cmd(0, 0, 0, Mlx4Cmd.NOP); // mlx4_NOP: the command EQ works
            for (int p = 1; p <= caps.numPorts(); p++) {
                cmd.cmd(0, p, 0, Mlx4Cmd.INIT_PORT);
            }
            cmd.log.endBringUp();
            loaded = true;
        } catch (RuntimeException e) {
            cmd.log.endBringUp();
            teardown(true);
            throw e;
        }
    }

    /**
     * {@code mlx4_init_icm} and {@code mlx4_INIT_HCA}: the tables laid out in ICM, each aligned to
     * its size (the dMPT table first, the MTT table last), the auxiliary ICM the firmware asks
     * for, then INIT_HCA.
     */
    private void initHca() {
        long dmpt = 0;
        long qpc = align(dmpt + (long) caps.maxMpts() * caps.dmptEntrySz());
        long cqc = align(qpc + (long) caps.maxQps() * caps.qpcEntrySz());
        long srqc = align(cqc + (long) caps.maxCqs() * caps.cqcEntrySz());
        long eqc = align(srqc + (long) caps.maxSrqs() * caps.srqEntrySz());
        long mttBase = align(eqc + (long) caps.maxEqs() * caps.eqcEntrySz());
        long icmSize = align(mttBase + ((long) caps.mttEntrySz() << LOG_NUM_MTTS));
        int aux = fw.setIcmSize(icmSize);
        icm.mapAux(aux);
        fw.initHca(new Fw.InitHcaParam(qpc, log2(caps.maxQps()), srqc, log2(caps.maxSrqs()), cqc, log2(caps.maxCqs()), eqc,
                log2(caps.maxEqs()), dmpt, log2(caps.maxMpts()), mttBase));
        hcaUp = true;
        icm.table(mttBase, caps.mttEntrySz());
        mtt = new Mtt(name, icm, caps.reservedMtts(), 1 << LOG_NUM_MTTS);
        mr = new Mr(this, caps.reservedMrws(), caps.maxMpts());
    }

    private static long align(long v) {
        return v + 0xfff & ~0xfffL;
    }

    private static int log2(int n) {
        return 31 - Integer.numberOfLeadingZeros(n);
    }

    /** {@code mlx4_init_eq_table}: the async EQ (with the command completions) and one completion EQ, armed. */
    private void setupEqs() {
        int first = caps.reservedEqs();
        asyncEq = Eq.create(this, first, ASYNC_EQ_SIZE, ASYNC_VECTOR);
        compEq = Eq.create(this, first + 1, COMP_EQ_SIZE, COMP_VECTOR);
        Eq a = asyncEq;
        Eq c = compEq;
        fn.requestIrq(ASYNC_VECTOR, v -> a.poll(this));
        fn.requestIrq(COMP_VECTOR, v -> c.poll(this));
        cmd.cmd(Mlx4Cmd.ASYNC_EVENT_MASK, a.eqn, 0, Mlx4Cmd.MAP_EQ);
        a.arm();
        c.arm();
    }

    /** The EQ completion events of CQs go to (SW2HW_CQ's {@code comp_eqn}). */
    public int compEqn() {
        return compEq.eqn;
    }

    /** {@code mlx4_eq_int}'s switch on the EQE type; called on an EQ's interrupt thread. */
    void dispatch(int type, int subType, MemorySegment e) {
        Events h = events;
        int number = e.get(BE32, Eqe.DATA) & 0xff_ffff;
        switch (type) {
            case Mlx4Cmd.EVENT_CMD -> cmd.event(Eq.cmdToken(e), Eq.cmdStatus(e), Eq.cmdOut(e));
            case Mlx4Cmd.EVENT_COMP -> {
                if (h != null) {
                    h.cqCompletion(number);
                }
            }
            case Mlx4Cmd.EVENT_CQ_ERROR -> {
                if (h != null) {
                    h.cqError(number);
                }
            }
            case Mlx4Cmd.EVENT_PORT_CHANGE -> {
                if (h != null) {
                    h.portChange(e.get(BE32, Eqe.PORT_CHANGE_PORT) >>> 28, subType == Mlx4Cmd.PORT_CHANGE_SUBTYPE_ACTIVE);
                }
            }
            case Mlx4Cmd.EVENT_SRQ_LIMIT, Mlx4Cmd.EVENT_SRQ_CATAS_ERROR -> {
                if (h != null) {
                    h.srqEvent(number, type);
                }
            }
            default -> {
                if (h != null) {
                    h.qpEvent(number, type);
                }
            }
        }
    }

    /** {@code mlx4_unload_one}: ports closed, polling again, EQs back, CLOSE_HCA, ICM, aux and firmware area back. */
    public void unload() {
        teardown(false);
    }

    /**
     * A surprise removal ({@code mlx4_enter_error_state}): commands stop, the chip is reset (a
     * write a gone device drops), the interrupts freed, every page the driver lent taken back.
     */
    public void enterErrorState() {
        cmd.markGone();
        fn.write32be(0, Hcr.RESET, Hcr.RESET_VALUE);
        teardown(true);
    }

    private void teardown(boolean error) {
        loaded = false;
        if (!error && caps != null) {
            for (int p = 1; p <= caps.numPorts(); p++) {
                try {
                    cmd.cmd(0, p, 0, Mlx4Cmd.CLOSE_PORT);
                } catch (RuntimeException ignored) {
                    // a port INIT_PORT did not reach, or a device gone: nothing to close
                }
            }
        }
        cmd.usePolling();
        fn.freeIrq(ASYNC_VECTOR); // waits for a handler still running
        fn.freeIrq(COMP_VECTOR);
        for (Eq eq : new Eq[] {asyncEq, compEq}) {
            if (eq != null) {
                eq.destroy(this);
            }
        }
        asyncEq = null;
        compEq = null;
        if (hcaUp) {
            try {
                cmd.cmd(0, 0, 0, Mlx4Cmd.CLOSE_HCA);
            } catch (RuntimeException ignored) {
                // reset or gone: nothing runs any more
            }
            hcaUp = false;
        }
        icm.freeAll();
        dma.freeAll();
    }

    @Override
    public String toString() {
        return name + " (" + fn.bdf() + ")";
    }
}
