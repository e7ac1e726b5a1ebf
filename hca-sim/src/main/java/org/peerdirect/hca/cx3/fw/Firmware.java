package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import org.peerdirect.hca.cx3.ifc.IcmMap;
import org.peerdirect.hca.cx3.ifc.InitHca;
import org.peerdirect.hca.cx3.ifc.Mad;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Mtt;
import org.peerdirect.hca.cx3.ifc.QueryAdapter;
import org.peerdirect.hca.cx3.ifc.QueryDevCap;
import org.peerdirect.hca.cx3.ifc.QueryFw;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HcaPort;
import org.peerdirect.hca.engine.PortCounters;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The ConnectX-3 firmware behind the HCR: a table from opcode to handler, the device's state
 * ({@code RESET} → {@code MAP_FA} + {@code RUN_FW} → running → {@code INIT_HCA} → up, and back by
 * {@code CLOSE_HCA} and {@code UNMAP_FA}), the bring-up and management commands, and the
 * transport engine it starts at {@code INIT_HCA}. Every command ends in a status the driver's
 * {@code mlx4_status_to_errno} knows; a malformed one changes nothing.
 *
 * <p>Lock rules: the caller ({@link ConnectX3Device}) holds its firmware lock around
 * {@link #execute} and {@link #reset}: one command at a time, never under a reset.
 */
final class Firmware {

    /** The device states the commands move through. */
    enum State { RESET, RUNNING, UP }

    /** One command as the HCR carried it. */
    record Cmd(int opcode, int opMod, long inParam, int inMod, long outParam, int token) {
    }

    /** A command's work: returns the immediate output parameter (ignored for commands with an output mailbox). */
    @FunctionalInterface
    interface Handler {
        long run(Cmd c) throws Refused;
    }

    /** Firmware version 2.42.5000, as QUERY_FW reports it. */
    static final int FW_MAJOR = 2;
    static final int FW_MINOR = 42;
    static final int FW_SUBMINOR = 5000;
    static final int CMD_IF_REV = 3;
    static final int LOG_MAX_CMDS = 4;
    /** Pages of the firmware area. */
    static final int FW_PAGES = 16;
    static final String BOARD_ID = "MT_1090120019";
    static final int LOG_MAX_EQ = 5;
    static final int LOG_RSVD_QP = 7;
    static final int RSVD_UARS = 1;
    /** PDs below this are reserved (QUERY_DEV_CAP's rsvd_pd). */
    static final int RSVD_PDS = 1;
    /** log2 WQEs of a QP's queue or an SRQ, and the largest send and receive WQE (QUERY_DEV_CAP). */
    static final int LOG_MAX_WQES = 14;
    static final int MAX_DESC_SZ_SQ = 1008;
    static final int MAX_DESC_SZ_RQ = 512;
    /** ICM bytes one auxiliary page covers. */
    static final long AUX_COVERS = 64L << 20;

    final String name;
    final PciFunction fn;
    final DmaPort port;
    final long nodeGuid;
    final int nports;
    final Icm icm;
    final Eqs eqs;
    final Tpt tpt;
    final Qps qps;
    final Srqs srqs;
    final Cqs cqs;
    private final Supplier<HcaDevice> bringUp;
    private final Map<Integer, Handler> table = new HashMap<>();
    private volatile State state = State.RESET;
    private volatile HcaDevice engine;
    private final boolean[] portUp;
    private long auxNeeded;
    private volatile String lastRefusal = "";
    final AtomicLong executed = new AtomicLong();
    final AtomicLong refused = new AtomicLong();

    Firmware(String name, PciFunction fn, long nodeGuid, int nports, Supplier<HcaDevice> bringUp) {
        this.name = name;
        this.fn = fn;
        this.port = fn.dmaPort();
        this.nodeGuid = nodeGuid;
        this.nports = nports;
        this.bringUp = bringUp;
        this.icm = new Icm(port);
        this.eqs = new Eqs(this);
        this.tpt = new Tpt(this);
        this.qps = new Qps(this);
        this.srqs = new Srqs(this);
        this.cqs = new Cqs(this);
        this.portUp = new boolean[nports + 1];
        table.put(Mlx4Cmd.QUERY_FW, this::queryFw);
        table.put(Mlx4Cmd.MAP_FA, c -> mapFa(c));
        table.put(Mlx4Cmd.RUN_FW, c -> runFw());
        table.put(Mlx4Cmd.UNMAP_FA, c -> unmapFa());
        table.put(Mlx4Cmd.QUERY_DEV_CAP, this::queryDevCap);
        table.put(Mlx4Cmd.QUERY_ADAPTER, this::queryAdapter);
        table.put(Mlx4Cmd.SET_ICM_SIZE, this::setIcmSize);
        table.put(Mlx4Cmd.MAP_ICM_AUX, this::mapIcmAux);
        table.put(Mlx4Cmd.UNMAP_ICM_AUX, c -> unmapIcmAux());
        table.put(Mlx4Cmd.MAP_ICM, this::mapIcm);
        table.put(Mlx4Cmd.UNMAP_ICM, this::unmapIcm);
        table.put(Mlx4Cmd.INIT_HCA, this::initHca);
        table.put(Mlx4Cmd.CLOSE_HCA, c -> closeHca());
        table.put(Mlx4Cmd.INIT_PORT, c -> initPort(c, true));
        table.put(Mlx4Cmd.CLOSE_PORT, c -> initPort(c, false));
        table.put(Mlx4Cmd.MAD_IFC, this::madIfc);
        table.put(Mlx4Cmd.NOP, c -> 0);
        table.put(Mlx4Cmd.WRITE_MTT, this::writeMtt);
        eqs.register(table);
        tpt.register(table);
        qps.register(table);
        srqs.register(table);
        cqs.register(table);
        new Diag(this, nports).register(table);
    }

    /** The result of one command: its status and immediate output. */
    record Result(int status, long out) {
    }

    /** Executes one command; never throws. */
    Result execute(Cmd c) {
        Handler h = table.get(c.opcode());
        try {
            if (h == null) {
                throw new Refused(Mlx4Cmd.STAT_BAD_OP, "opcode " + Mlx4Cmd.name(c.opcode()) + " is not supported");
            }
            long out = h.run(c);
            executed.incrementAndGet();
            return new Result(Mlx4Cmd.STAT_OK, out);
        } catch (Refused r) {
            refused.incrementAndGet();
            lastRefusal = Mlx4Cmd.name(c.opcode()) + ": " + r.getMessage();
            return new Result(r.status, c.outParam());
        } catch (RuntimeException e) { // a bug of the model must not wedge the HCR: the driver gets an internal error
            refused.incrementAndGet();
            lastRefusal = Mlx4Cmd.name(c.opcode()) + ": internal error " + e;
            return new Result(Mlx4Cmd.STAT_INTERNAL_ERR, c.outParam());
        }
    }

    State state() {
        return state;
    }

    String lastRefusal() {
        return lastRefusal;
    }

    HcaDevice engine() {
        return engine;
    }

    void need(State s, Cmd c) throws Refused {
        if (state != s) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SYS_STATE, "the device is " + state + ", " + Mlx4Cmd.name(c.opcode()) + " needs " + s);
        }
    }

    void needUp(Cmd c) throws Refused {
        need(State.UP, c);
    }

    // ------------------------------------------------------------------ mailboxes

    /** The input mailbox of {@code c}: {@code len} bytes read by DMA from the page at its input parameter. */
    MemorySegment inbox(Cmd c, int len) throws Refused {
        return mailbox(c.inParam(), len, false, null);
    }

    /** Writes {@code out} to the output mailbox of {@code c}. */
    void outbox(Cmd c, MemorySegment out) throws Refused {
        mailbox(c.outParam(), (int) out.byteSize(), true, out);
    }

    private MemorySegment mailbox(long at, int len, boolean write, MemorySegment out) throws Refused {
        if ((at & (Mlx4Cmd.MAILBOX_SIZE - 1)) != 0 || at == 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("mailbox address 0x%x is not a page (4 KiB aligned, not 0)", at));
        }
        try {
            if (write) {
                port.write(at, out, 0, len);
                return out;
            }
            MemorySegment in = MemorySegment.ofArray(new byte[len]);
            port.read(at, in, 0, len);
            return in;
        } catch (IommuFault f) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("mailbox at 0x%x is not mapped for the device", at));
        }
    }

    // ------------------------------------------------------------------ firmware area and ICM

    private long queryFw(Cmd c) throws Refused {
        MemorySegment o = MemorySegment.ofArray(new byte[QueryFw.OUT_SIZE]);
        o.set(BE64, QueryFw.FW_VER, (long) FW_MAJOR << 32 | FW_MINOR << 16 | FW_SUBMINOR);
        o.set(BE16, QueryFw.CMD_IF_REV, (short) CMD_IF_REV);
        o.set(U8, QueryFw.MAX_CMD, (byte) LOG_MAX_CMDS);
        o.set(BE16, QueryFw.FW_PAGES, (short) FW_PAGES);
        outbox(c, o);
        return 0;
    }

    private long mapFa(Cmd c) throws Refused {
        need(State.RESET, c);
        icm.mapFa(Icm.entries(inbox(c, Mlx4Cmd.MAILBOX_SIZE), c.inMod()));
        return 0;
    }

    private long runFw() throws Refused {
        if (state != State.RESET) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SYS_STATE, "the firmware already runs");
        }
        if (icm.faPages() < FW_PAGES) {
            throw new Refused(Mlx4Cmd.STAT_ICM_ERROR, "the firmware area has " + icm.faPages() + " pages, QUERY_FW asked for " + FW_PAGES);
        }
        state = State.RUNNING;
        return 0;
    }

    private long unmapFa() throws Refused {
        if (state == State.UP) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SYS_STATE, "UNMAP_FA while the HCA is initialised (CLOSE_HCA first)");
        }
        icm.clear();
        auxNeeded = 0;
        state = State.RESET;
        return 0;
    }

    private long setIcmSize(Cmd c) throws Refused {
        need(State.RUNNING, c);
        long size = c.inParam();
        if (size <= 0 || size > 1L << 36 || (size & 0xfff) != 0) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "ICM size " + size + " (whole pages, at most 64 GiB)");
        }
        icm.icmSize = size;
        auxNeeded = (size + AUX_COVERS - 1) / AUX_COVERS;
        return auxNeeded;
    }

    private long mapIcmAux(Cmd c) throws Refused {
        need(State.RUNNING, c);
        icm.mapAux(Icm.entries(inbox(c, Mlx4Cmd.MAILBOX_SIZE), c.inMod()));
        return 0;
    }

    private long unmapIcmAux() throws Refused {
        if (state == State.UP) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SYS_STATE, "UNMAP_ICM_AUX while the HCA is initialised");
        }
        icm.unmapAux();
        return 0;
    }

    private long mapIcm(Cmd c) throws Refused {
        if (state == State.RESET) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SYS_STATE, "MAP_ICM before RUN_FW");
        }
        icm.mapIcm(Icm.entries(inbox(c, Mlx4Cmd.MAILBOX_SIZE), c.inMod()));
        return 0;
    }

    private long unmapIcm(Cmd c) throws Refused {
        if (state == State.RESET) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SYS_STATE, "UNMAP_ICM before RUN_FW");
        }
        icm.unmapIcm(c.inParam(), c.inMod() & 0xffff_ffffL);
        return 0;
    }

    private long writeMtt(Cmd c) throws Refused {
        needUp(c);
        MemorySegment in = inbox(c, Mlx4Cmd.MAILBOX_SIZE);
        icm.writeMtt(in.get(BE64, Mtt.WRITE_START), in, c.inMod());
        return 0;
    }

    // ------------------------------------------------------------------ capabilities

    private long queryDevCap(Cmd c) throws Refused {
        if (state == State.RESET) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SYS_STATE, "QUERY_DEV_CAP before RUN_FW");
        }
        MemorySegment o = MemorySegment.ofArray(new byte[QueryDevCap.OUT_SIZE]);
        o.set(U8, QueryDevCap.MAX_SRQ_SZ, (byte) LOG_MAX_WQES);
        o.set(U8, QueryDevCap.MAX_QP_SZ, (byte) LOG_MAX_WQES);
        o.set(U8, QueryDevCap.RSVD_QP, (byte) LOG_RSVD_QP);
        o.set(U8, QueryDevCap.MAX_QP, (byte) log2(HcaDevice.MAX_QP));
        o.set(U8, QueryDevCap.RSVD_SRQ, (byte) 0);
        o.set(U8, QueryDevCap.MAX_SRQ, (byte) log2(HcaDevice.MAX_SRQ));
        o.set(U8, QueryDevCap.MAX_CQ_SZ, (byte) 22);
        o.set(U8, QueryDevCap.RSVD_CQ, (byte) 0);
        o.set(U8, QueryDevCap.MAX_CQ, (byte) log2(HcaDevice.MAX_CQ));
        o.set(U8, QueryDevCap.MAX_MPT, (byte) log2(HcaDevice.MAX_MPT));
        o.set(U8, QueryDevCap.RSVD_EQ, (byte) 0);
        o.set(U8, QueryDevCap.MAX_EQ, (byte) LOG_MAX_EQ);
        o.set(U8, QueryDevCap.RSVD_MTT, (byte) 0);
        o.set(U8, QueryDevCap.MAX_MRW_SZ, (byte) 40);
        // two reserved MPTs: index 1 with key byte 0 would be key 0x100, MLX4_INVALID_LKEY, which ends a receive WQE's scatter list
        o.set(U8, QueryDevCap.RSVD_MRW, (byte) 1);
        o.set(U8, QueryDevCap.MAX_REQ_QP, (byte) 4);
        o.set(U8, QueryDevCap.MAX_RES_QP, (byte) 7);
        o.set(U8, QueryDevCap.VL_PORT, (byte) nports);
        o.set(U8, QueryDevCap.RSVD_UAR, (byte) (RSVD_UARS << 4));
        o.set(U8, QueryDevCap.UAR_SZ, (byte) 2); // 4 MiB of UAR pages; the BlueFlame pages follow in BAR2 (Uar.BF_BASE)
        o.set(U8, QueryDevCap.PAGE_SZ, (byte) 12);
        o.set(U8, QueryDevCap.BF, (byte) 0x80);
        o.set(U8, QueryDevCap.LOG_BF_REG_SZ, (byte) 9);
        o.set(U8, QueryDevCap.LOG_MAX_BF_REGS_PER_PAGE, (byte) 3);
        o.set(U8, QueryDevCap.MAX_SG_SQ, (byte) HcaDevice.MAX_SGE);
        o.set(BE16, QueryDevCap.MAX_DESC_SZ_SQ, (short) MAX_DESC_SZ_SQ);
        o.set(U8, QueryDevCap.MAX_SG_RQ, (byte) HcaDevice.MAX_SGE);
        o.set(BE16, QueryDevCap.MAX_DESC_SZ_RQ, (short) MAX_DESC_SZ_RQ);
        o.set(U8, QueryDevCap.RSVD_PD, (byte) (RSVD_PDS << 4));
        o.set(U8, QueryDevCap.MAX_PD, (byte) 24);
        o.set(BE16, QueryDevCap.QPC_ENTRY_SZ, (short) 256);
        o.set(BE16, QueryDevCap.EQC_ENTRY_SZ, (short) 64);
        o.set(BE16, QueryDevCap.CQC_ENTRY_SZ, (short) 64);
        o.set(BE16, QueryDevCap.SRQ_ENTRY_SZ, (short) 32);
        o.set(BE16, QueryDevCap.MTT_ENTRY_SZ, (short) Mtt.ENTRY_SIZE);
        o.set(BE16, QueryDevCap.D_MPT_ENTRY_SZ, (short) 64);
        o.set(BE32, QueryDevCap.RSVD_LKEY, 0x100);
        o.set(BE64, QueryDevCap.MAX_ICM_SZ, 1L << 36);
        outbox(c, o);
        return 0;
    }

    private static int log2(int n) {
        return 31 - Integer.numberOfLeadingZeros(n);
    }

    private long queryAdapter(Cmd c) throws Refused {
        if (state == State.RESET) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SYS_STATE, "QUERY_ADAPTER before RUN_FW");
        }
        MemorySegment o = MemorySegment.ofArray(new byte[QueryAdapter.VSD_BOARD_ID + QueryAdapter.BOARD_ID_LEN]);
        o.set(U8, QueryAdapter.INTA_PIN, (byte) 1);
        o.set(BE16, QueryAdapter.VSD_VENDOR_ID, (short) 0x15b3);
        byte[] id = BOARD_ID.getBytes(StandardCharsets.US_ASCII);
        MemorySegment.copy(MemorySegment.ofArray(id), 0, o, QueryAdapter.VSD_BOARD_ID, id.length);
        outbox(c, o);
        return 0;
    }

    // ------------------------------------------------------------------ INIT_HCA / CLOSE_HCA, ports

    /**
     * {@code INIT_HCA}: the context tables' places in ICM (page-aligned, inside the ICM size), the
     * auxiliary ICM large enough; the engine comes up (its ports on the fabric), or the one a
     * {@code CLOSE_HCA} left is used again.
     */
    private long initHca(Cmd c) throws Refused {
        need(State.RUNNING, c);
        MemorySegment in = inbox(c, InitHca.IN_SIZE);
        if ((in.get(U8, InitHca.VERSION) & 0xff) != InitHca.VERSION_2) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "INIT_HCA layout version " + (in.get(U8, InitHca.VERSION) & 0xff) + ", not 2");
        }
        if (icm.auxPages() < auxNeeded || auxNeeded == 0) {
            throw new Refused(Mlx4Cmd.STAT_ICM_ERROR, "auxiliary ICM has " + icm.auxPages() + " pages, SET_ICM_SIZE asked for " + auxNeeded);
        }
        long[] bases = {base(in, InitHca.QPC_BASE), base(in, InitHca.SRQC_BASE), base(in, InitHca.CQC_BASE), base(in, InitHca.EQC_BASE),
            base(in, InitHca.DMPT_BASE), base(in, InitHca.MTT_BASE)};
        long mtt = bases[5];
        long end = icm.icmSize;
        for (long b : bases) {
            if (b > mtt && b < end) {
                end = b;
            }
        }
        icm.mttBase = mtt;
        icm.mttEntries = (end - mtt) / Mtt.ENTRY_SIZE;
        HcaDevice e = engine;
        if (e == null || e.removed()) {
            e = bringUp.get();
            engine = e;
        }
        eqs.attach(e);
        java.util.Arrays.fill(portUp, false);
        state = State.UP;
        return 0;
    }

    private long base(MemorySegment in, int off) throws Refused {
        long b = in.get(BE64, off) & ~0x1fL; // the low bits carry the table's log size
        if ((b & 0xfff) != 0 || b >= icm.icmSize) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, String.format("INIT_HCA: table base 0x%x at 0x%x is not a page inside the ICM (0x%x bytes)",
                    b, off, icm.icmSize));
        }
        return b;
    }

    /** {@code CLOSE_HCA}: every EQ stops, every object of the engine goes; the firmware runs on (UNMAP_FA next). */
    private long closeHca() throws Refused {
        if (state != State.UP) {
            throw new Refused(Mlx4Cmd.STAT_BAD_SYS_STATE, "CLOSE_HCA while the HCA is " + state);
        }
        eqs.killAll();
        HcaDevice e = engine;
        if (e != null && !e.removed()) {
            e.reset();
        }
        tpt.clear();
        qps.dropAll();
        srqs.dropAll();
        cqs.dropAll();
        state = State.RUNNING;
        return 0;
    }

    private long initPort(Cmd c, boolean up) throws Refused {
        needUp(c);
        int p = c.inMod();
        if (p < 1 || p > nports) {
            throw new Refused(Mlx4Cmd.STAT_BAD_INDEX, "port " + p + " (ports 1.." + nports + ")");
        }
        if (portUp[p] == up) {
            throw new Refused(Mlx4Cmd.STAT_BAD_RES_STATE, "port " + p + " is already " + (up ? "initialised" : "closed"));
        }
        portUp[p] = up;
        return 0;
    }

    /**
     * {@code MAD_IFC}: the subnet management agent answers Get(NodeInfo) and Get(PortInfo) of a
     * LID-routed SMP, the performance management agent Get(PortCounters) and
     * Get(PortCountersExtended); another attribute gets a MAD status, another class or method a
     * bad-packet command status.
     */
    private long madIfc(Cmd c) throws Refused {
        needUp(c);
        int p = c.inMod() & 0xffff;
        if (p < 1 || p > nports) {
            throw new Refused(Mlx4Cmd.STAT_BAD_INDEX, "MAD_IFC on port " + p + " (ports 1.." + nports + ")");
        }
        MemorySegment mad = inbox(c, Mad.SIZE);
        int mgmtClass = mad.get(U8, Mad.MGMT_CLASS) & 0xff;
        if (mgmtClass != Mad.MGMT_CLASS_SUBN_LID_ROUTED && mgmtClass != Mad.MGMT_CLASS_PERF_MGMT || mad.get(U8, Mad.METHOD) != Mad.METHOD_GET) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PKT, String.format("MAD class 0x%x method 0x%x: only Get of a LID-routed SMP or of the PMA",
                    mad.get(U8, Mad.MGMT_CLASS), mad.get(U8, Mad.METHOD)));
        }
        int attr = mad.get(BE16, Mad.ATTR_ID) & 0xffff;
        mad.set(U8, Mad.METHOD, (byte) Mad.METHOD_GET_RESP);
        mad.asSlice(Mad.DATA).fill((byte) 0);
        long d = Mad.DATA;
        if (mgmtClass == Mad.MGMT_CLASS_PERF_MGMT) {
            pma(mad, attr, engine.port(p).counters());
        } else if (attr == Mad.ATTR_NODE_INFO) {
            mad.set(U8, d + Mad.NI_NODE_TYPE, (byte) 1); // a channel adapter
            mad.set(U8, d + Mad.NI_NUM_PORTS, (byte) nports);
            mad.set(BE64, d + Mad.NI_SYS_IMAGE_GUID, nodeGuid);
            mad.set(BE64, d + Mad.NI_NODE_GUID, nodeGuid);
            mad.set(BE64, d + Mad.NI_PORT_GUID, nodeGuid + p);
            mad.set(BE16, d + Mad.NI_DEVICE_ID, (short) 0x1003);
            mad.set(BE32, d + Mad.NI_VENDOR_ID, p << 24 | 0x0002c9);
        } else if (attr == Mad.ATTR_PORT_INFO) {
            HcaPort hp = engine.port(p);
            boolean active = hp.active() && portUp[p];
            mad.set(BE16, d + Mad.PI_LID, (short) hp.lid());
            mad.set(U8, d + Mad.PI_STATE, (byte) (active ? Mad.PORT_STATE_ACTIVE : Mad.PORT_STATE_DOWN));
            mad.set(U8, d + Mad.PI_PHYS_STATE, (byte) ((active ? 5 : 3) << 4));
        } else {
            mad.set(BE16, Mad.STATUS, (short) Mad.STATUS_UNSUP_METHOD_ATTR);
        }
        outbox(c, mad);
        return 0;
    }

    /**
     * The performance management agent's Get: PortCounters (the error counters the port keeps,
     * saturating at 16 bits as IBA's) and PortCountersExtended (64-bit traffic, the data in 4-byte
     * words); another attribute gets a MAD status.
     */
    private static void pma(MemorySegment mad, int attr, PortCounters pc) {
        long d = Mad.DATA;
        if (attr == Mad.ATTR_PORT_COUNTERS) {
            mad.set(BE16, d + Mad.PC_PORT_RCV_ERRORS, (short) Math.min(0xffff, pc.get(PortCounters.RCV_ERRORS)));
            mad.set(BE16, d + Mad.PC_PORT_XMIT_DISCARDS, (short) Math.min(0xffff, pc.get(PortCounters.XMIT_DISCARDS)));
        } else if (attr == Mad.ATTR_PORT_COUNTERS_EXT) {
            mad.set(BE64, d + Mad.PCE_XMIT_DATA, pc.get(PortCounters.XMIT_OCTETS) >>> 2);
            mad.set(BE64, d + Mad.PCE_RCV_DATA, pc.get(PortCounters.RCV_OCTETS) >>> 2);
            mad.set(BE64, d + Mad.PCE_XMIT_PACKETS, pc.get(PortCounters.XMIT_PACKETS));
            mad.set(BE64, d + Mad.PCE_RCV_PACKETS, pc.get(PortCounters.RCV_PACKETS));
            mad.set(BE64, d + Mad.PCE_UNICAST_XMIT_PACKETS, pc.get(PortCounters.XMIT_PACKETS));
            mad.set(BE64, d + Mad.PCE_UNICAST_RCV_PACKETS, pc.get(PortCounters.RCV_PACKETS));
        } else {
            mad.set(BE16, Mad.STATUS, (short) Mad.STATUS_UNSUP_METHOD_ATTR);
        }
    }

    /**
     * A chip reset ({@code mlx4_reset}), or the function's removal: the EQs stop first (nothing is
     * written to the driver's memory any more), then the engine goes (its ports leave the fabric,
     * QPs flush, keys are revoked) and the firmware forgets the memory it was lent.
     */
    void reset() {
        eqs.killAll();
        tpt.clear();
        cqs.dropAll();
        HcaDevice e = engine;
        if (e != null) {
            e.remove(); // QPs flush: the receive queues' WQEs still fetched from memory, CQEs written
        }
        qps.dropAll();
        srqs.dropAll();
        icm.clear();
        auxNeeded = 0;
        state = State.RESET;
    }

    /** Checks an ICM page count: used by the tools' view. */
    long icmMappedPages() {
        return icm.icmMappedBytes() / IcmMap.ICM_PAGE_SIZE;
    }
}
