package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.BitSet;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.hca.cx4.ifc.Vport;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Odp;
import org.peerdirect.hca.cx4.ifc.IfcField;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The firmware's command execution and the HCA state it owns: the function state
 * ({@link HcaState}), ISSI, the capabilities, the pages the driver gave ({@link FirmwarePages}),
 * UARs, PDs and EQs. Every command gets a status and a syndrome that names the check that failed
 * (firmware syndromes have no generic meaning; the model's are {@code 0x0badNNNN}); nothing here
 * throws to the queue but {@link CommandQueue.Deferred}, which parks a command until the driver
 * answers a page request.
 *
 * <p>Lock rules: the firmware thread alone calls everything here, except {@link #eq} (the BAR
 * write handler, on the driver's thread, finds an EQ for its doorbell: the EQ table is an atomic
 * array, and an EQ guards its own ring state).
 */
final class Firmware implements CommandQueue.Executor {

    // model syndromes: the check that failed
    static final int SYND_UNKNOWN_OPCODE = 0x0bad_0001;
    static final int SYND_BAD_STATE = 0x0bad_0002;
    static final int SYND_BAD_ISSI = 0x0bad_0003;
    static final int SYND_SHORT_OUTPUT = 0x0bad_0004;
    static final int SYND_SHORT_INPUT = 0x0bad_0005;
    static final int SYND_BAD_OP_MOD = 0x0bad_0006;
    static final int SYND_BAD_FUNCTION = 0x0bad_0007;
    static final int SYND_BAD_PAGE = 0x0bad_0008;
    static final int SYND_PAGES_MISSING = 0x0bad_0009;
    static final int SYND_PAGES_HELD = 0x0bad_000a;
    static final int SYND_OBJECTS_LIVE = 0x0bad_000b;
    static final int SYND_BAD_CAP = 0x0bad_000c;
    static final int SYND_NO_SUCH_OBJECT = 0x0bad_000d;
    static final int SYND_LIMIT = 0x0bad_000e;
    static final int SYND_BAD_EQ = 0x0bad_000f;
    static final int SYND_NO_PAGES = 0x0bad_0010;

    /** UAR pages start above the initialization segment (0x0000..0x400c) in BAR0. */
    static final int FIRST_UAR = 16;
    /** EQ context: the EQC and the event bitmask, in the firmware's pages. */
    static final int EQ_CONTEXT_BYTES = 1024;

    /** A command that failed a check: its status and syndrome. */
    static final class Refused extends Exception {
        final int status;
        final int syndrome;

        Refused(int status, int syndrome, String why) {
            super(why, null, false, false);
            this.status = status;
            this.syndrome = syndrome;
        }
    }

    private final DmaPort port;
    private final PciFunction fn;
    private final int uarPages;
    final FirmwarePages pages;
    private final byte[] maxGeneral = new byte[HcaCap.SIZE];
    private final byte[] curGeneral = new byte[HcaCap.SIZE];
    /** The ODP capability block (type 2): what the model can fault on, and what the driver enabled. */
    private final byte[] maxOdp = new byte[HcaCap.SIZE];
    private final byte[] curOdp = new byte[HcaCap.SIZE];
    private HcaState state = HcaState.DISABLED;
    private int issi;
    private String driverVersion = "";
    private final BitSet uars = new BitSet();
    private final BitSet pds = new BitSet();
    /** XRC domains allocated ({@code ALLOC_XRCD}), from 1. */
    private final BitSet xrcds = new BitSet();
    private final AtomicReferenceArray<HwEq> eqs;
    /**
     * Whether a command short of firmware pages may be parked for a page request (set by the
     * firmware loop: false when no page request can be delivered or the pages were refused).
     */
    boolean mayDefer;
    /** Why the last command was refused (for the model's log and tests). */
    private String lastRefusal = "";
    private int lastOpcode = -1;

    /** The data path: CQs, QPs, mkeys over the shared engine (firmware thread for commands). */
    final Transport transport;
    /** Page-fault EQEs and PAGE_FAULT_RESUME. */
    final PageFaults pageFaults;
    private final boolean ethernet;

    Firmware(PciFunction fn, DmaPort port, boolean ethernet, int uarPages, org.peerdirect.hca.engine.HcaDevice engine) {
        this.fn = fn;
        this.ethernet = ethernet;
        this.port = port;
        this.uarPages = uarPages;
        this.pages = new FirmwarePages(port);
        MemorySegment m = MemorySegment.ofArray(maxGeneral);
        // a real ConnectX-4 reports 15; the shared engine's receive queues hold at most 16351 WQEs
        HcaCap.LOG_MAX_SRQ_SZ.set(m, 0, 13);
        HcaCap.LOG_MAX_QP_SZ.set(m, 0, 15);
        HcaCap.LOG_MAX_QP.set(m, 0, 18);
        HcaCap.LOG_MAX_SRQ.set(m, 0, 16); // the engine's SRQ table (a real ConnectX-4: 23)
        HcaCap.LOG_MAX_CQ_SZ.set(m, 0, 22);
        HcaCap.LOG_MAX_CQ.set(m, 0, 24);
        HcaCap.LOG_MAX_EQ_SZ.set(m, 0, 22);
        HcaCap.LOG_MAX_MKEY.set(m, 0, 24);
        HcaCap.LOG_MAX_EQ.set(m, 0, 5);
        HcaCap.FORCE_TEARDOWN.set(m, 0, 1);
        HcaCap.LOG_MAX_KLM_LIST_SIZE.set(m, 0, 16);
        HcaCap.LOG_MAX_RA_REQ_QP.set(m, 0, 4);
        HcaCap.LOG_MAX_RA_RES_QP.set(m, 0, 4);
        HcaCap.CACHE_LINE_128BYTE.set(m, 0, 1);
        HcaCap.PKEY_TABLE_SIZE.set(m, 0, 0); // 128 entries
        HcaCap.LOCAL_CA_ACK_DELAY.set(m, 0, 16);
        HcaCap.PORT_TYPE.set(m, 0, ethernet ? HcaCap.PORT_TYPE_ETH : HcaCap.PORT_TYPE_IB);
        HcaCap.NUM_PORTS.set(m, 0, 1);
        HcaCap.LOG_MAX_MSG.set(m, 0, 30);
        HcaCap.CQE_VERSION.set(m, 0, 1);
        HcaCap.DRAIN_SIGERR.set(m, 0, 1);
        HcaCap.ROCE.set(m, 0, ethernet ? 1 : 0);
        HcaCap.ATOMIC.set(m, 0, 1);
        HcaCap.XRC.set(m, 0, 1);
        HcaCap.UD.set(m, 0, 1);
        HcaCap.RC.set(m, 0, 1);
        HcaCap.UAR_4K.set(m, 0, 1);
        HcaCap.UAR_SZ.set(m, 0, Integer.numberOfTrailingZeros(uarPages));
        HcaCap.LOG_PG_SZ.set(m, 0, 12);
        HcaCap.BF.set(m, 0, 1);
        HcaCap.DRIVER_VERSION.set(m, 0, 1);
        HcaCap.LOG_BF_REG_SIZE.set(m, 0, 9);
        HcaCap.MAX_WQE_SZ_SQ.set(m, 0, 1024);
        HcaCap.MAX_WQE_SZ_RQ.set(m, 0, 512);
        HcaCap.LOG_MAX_PD.set(m, 0, 24);
        HcaCap.LOG_MAX_XRCD.set(m, 0, 24);
        HcaCap.NUM_OF_UARS_PER_PAGE.set(m, 0, 1);
        HcaCap.PG.set(m, 0, 1);
        HcaCap.UMR_EXTENDED_TRANSLATION_OFFSET.set(m, 0, 1);
        // KSM mkeys of fixed-size entries and the null mkey: what implicit ODP's parent needs
        HcaCap.FIXED_BUFFER_SIZE.set(m, 0, 1);
        HcaCap.NULL_MKEY.set(m, 0, 1);
        HcaCap.ATOMIC_WRITE.set(m, 0, 1);
        HcaCap.FLUSH_GLOBAL.set(m, 0, 1);
        HcaCap.FLUSH_PERSISTENT.set(m, 0, 1);
        System.arraycopy(maxGeneral, 0, curGeneral, 0, HcaCap.SIZE);
        // the engine faults on every RC and XRC operation and on UD sends and SRQ receives; it carries no UC
        // or DC QPs, so their caps stay clear. SRQ receives are off until the driver enables them
        // (handle_hca_cap_odp sets the srq_receive caps to their maximum)
        MemorySegment o = MemorySegment.ofArray(maxOdp);
        Odp.RC_ODP_CAPS.set(o, 0, Odp.CAP_SEND | Odp.CAP_RECEIVE | Odp.CAP_WRITE | Odp.CAP_READ | Odp.CAP_ATOMIC | Odp.CAP_SRQ_RECEIVE);
        Odp.UD_ODP_CAPS.set(o, 0, Odp.CAP_SEND | Odp.CAP_SRQ_RECEIVE);
        // XRC: the RC operations, receiving only into XRC SRQs (an XRC QP has no receive queue)
        Odp.XRC_ODP_CAPS.set(o, 0, Odp.CAP_SEND | Odp.CAP_WRITE | Odp.CAP_READ | Odp.CAP_ATOMIC | Odp.CAP_SRQ_RECEIVE);
        resetOdpCaps();
        eqs = new AtomicReferenceArray<>(1 << HcaCap.LOG_MAX_EQ.get(m, 0));
        this.transport = new Transport(engine, port, this);
        this.pageFaults = new PageFaults(this, engine, transport);
    }

    PciFunction function() {
        return fn;
    }

    boolean uarAllocated(int uar) {
        return uar >= FIRST_UAR && uars.get(uar);
    }

    boolean pdAllocated(int pd) {
        return pd > 0 && pds.get(pd);
    }

    boolean xrcdAllocated(int xrcd) {
        return xrcd > 0 && xrcds.get(xrcd);
    }

    /** Fields a driver may change with {@code SET_HCA_CAP}, each at most its maximum; the rest is read-only. */
    private static final IfcField[] EDITABLE = { HcaCap.PKEY_TABLE_SIZE, HcaCap.LOG_MAX_QP, HcaCap.CMDIF_CHECKSUM, HcaCap.DRAIN_SIGERR,
            HcaCap.LOG_UAR_PAGE_SZ, HcaCap.CACHE_LINE_128BYTE, HcaCap.UAR_4K, HcaCap.DCT };

    /** The ODP block's current values: the maximum without the SRQ-receive bits the driver turns on. */
    private void resetOdpCaps() {
        System.arraycopy(maxOdp, 0, curOdp, 0, HcaCap.SIZE);
        MemorySegment c = MemorySegment.ofArray(curOdp);
        for (IfcField f : ODP_TRANSPORTS) {
            f.set(c, 0, f.get(c, 0) & ~Odp.CAP_SRQ_RECEIVE);
        }
    }

    private static final IfcField[] ODP_TRANSPORTS = { Odp.RC_ODP_CAPS, Odp.UC_ODP_CAPS, Odp.UD_ODP_CAPS, Odp.XRC_ODP_CAPS, Odp.DC_ODP_CAPS };

    HcaState state() {
        return state;
    }

    int issi() {
        return issi;
    }

    String driverVersion() {
        return driverVersion;
    }

    String lastRefusal() {
        return lastRefusal;
    }

    int uarsAllocated() {
        return uars.cardinality();
    }

    /** The EQ with this number, or null (any thread). */
    HwEq eq(int eqn) {
        return eqn >= 0 && eqn < eqs.length() ? eqs.get(eqn) : null;
    }

    /** EQEs dropped on full rings and EQE writes the IOMMU stopped, over every live EQ. */
    long eqOverruns() {
        long n = 0;
        for (int i = 0; i < eqs.length(); i++) {
            HwEq e = eqs.get(i);
            n += e == null ? 0 : e.overruns() + e.dmaFaults();
        }
        return n;
    }

    int eqCount() {
        int n = 0;
        for (int i = 0; i < eqs.length(); i++) {
            n += eqs.get(i) == null ? 0 : 1;
        }
        return n;
    }

    /** The UAR page a BAR0 offset falls in, or -1 (the initialization segment, or no such UAR). */
    int uarOf(long barOffset) {
        long page = barOffset >>> 12;
        return page >= FIRST_UAR && page < uarPages ? (int) page : -1;
    }

    /** The opcode of the last command executed (or parked). */
    int lastOpcode() {
        return lastOpcode;
    }

    @Override
    public void execute(MemorySegment in, MemorySegment out) throws CommandQueue.Deferred {
        int opcode = CommandQueue.opcode(in);
        lastOpcode = opcode;
        int opMod = in.get(BE32, 4) & 0xffff;
        try {
            int inNeed = inputLength(opcode, in);
            if (inNeed < 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_OP_ERR, SYND_UNKNOWN_OPCODE, Mlx5Cmd.name(opcode));
            }
            HcaState next = state.next(opcode);
            if (next == null) {
                throw new Refused(Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, SYND_BAD_STATE, Mlx5Cmd.name(opcode) + " in state " + state);
            }
            if (in.byteSize() < inNeed) {
                throw new Refused(Mlx5Cmd.STAT_BAD_INP_LEN_ERR, SYND_SHORT_INPUT,
                        Mlx5Cmd.name(opcode) + " needs " + inNeed + " input bytes, has " + in.byteSize());
            }
            int outNeed = outputLength(opcode);
            if (out.byteSize() < outNeed) {
                throw new Refused(Mlx5Cmd.STAT_BAD_OUTP_LEN_ERR, SYND_SHORT_OUTPUT,
                        Mlx5Cmd.name(opcode) + " needs " + outNeed + " output bytes, has " + out.byteSize());
            }
            run(opcode, opMod, in, out);
            state = next;
            CommandQueue.status(out, Mlx5Cmd.STAT_OK, 0);
        } catch (Refused r) {
            lastRefusal = r.getMessage();
            out.fill((byte) 0);
            CommandQueue.status(out, r.status, r.syndrome);
        }
    }

    /** The input a command needs (the fixed part and its lists), or -1 for an opcode the model does not know. */
    private static int inputLength(int opcode, MemorySegment in) {
        return switch (opcode) {
            // INIT_HCA: sw_owner_id (0x10..0x1f) only when that cap is set, which the model does not report
            case Mlx5Cmd.ENABLE_HCA, Mlx5Cmd.DISABLE_HCA, Mlx5Cmd.QUERY_ISSI, Mlx5Cmd.SET_ISSI, Mlx5Cmd.QUERY_PAGES, Mlx5Cmd.QUERY_HCA_CAP,
                    Mlx5Cmd.INIT_HCA, Mlx5Cmd.TEARDOWN_HCA, Mlx5Cmd.ALLOC_UAR, Mlx5Cmd.DEALLOC_UAR, Mlx5Cmd.ALLOC_PD, Mlx5Cmd.DEALLOC_PD,
                    Mlx5Cmd.DESTROY_EQ, Mlx5Cmd.QUERY_EQ, Mlx5Cmd.NOP, Mlx5Cmd.DESTROY_CQ, Mlx5Cmd.QUERY_CQ, Mlx5Cmd.DESTROY_QP,
                    Mlx5Cmd.QP_2ERR, Mlx5Cmd.QP_2RST, Mlx5Cmd.QUERY_QP, Mlx5Cmd.DESTROY_MKEY, Mlx5Cmd.QUERY_HCA_VPORT_CONTEXT,
                    Mlx5Cmd.QUERY_HCA_VPORT_GID, Mlx5Cmd.DESTROY_SRQ, Mlx5Cmd.PAGE_FAULT_RESUME, Mlx5Cmd.QUERY_SPECIAL_CONTEXTS, Mlx5Cmd.QUERY_SRQ,
                    Mlx5Cmd.ARM_RQ, Mlx5Cmd.ALLOC_XRCD, Mlx5Cmd.DEALLOC_XRCD, Mlx5Cmd.DESTROY_XRC_SRQ, Mlx5Cmd.QUERY_XRC_SRQ,
                    Mlx5Cmd.ARM_XRC_SRQ -> 16;
            case Mlx5Cmd.RST2INIT_QP, Mlx5Cmd.INIT2INIT_QP, Mlx5Cmd.INIT2RTR_QP, Mlx5Cmd.RTR2RTS_QP, Mlx5Cmd.RTS2RTS_QP,
                    Mlx5Cmd.SQERR2RTS_QP -> Qp.MODIFY_IN_LEN;
            case Mlx5Cmd.CREATE_CQ -> in.byteSize() < Cq.CREATE_CQ_IN_PAS ? (int) Cq.CREATE_CQ_IN_PAS
                    : (int) Cq.CREATE_CQ_IN_PAS + 8 * Transport.cqPages(in);
            case Mlx5Cmd.CREATE_QP -> in.byteSize() < Qp.CREATE_QP_IN_PAS ? (int) Qp.CREATE_QP_IN_PAS
                    : (int) Qp.CREATE_QP_IN_PAS + 8 * Transport.qpPages(in);
            case Mlx5Cmd.CREATE_SRQ, Mlx5Cmd.CREATE_XRC_SRQ -> in.byteSize() < Srq.CREATE_SRQ_IN_PAS ? (int) Srq.CREATE_SRQ_IN_PAS
                    : (int) Srq.CREATE_SRQ_IN_PAS + 8 * Transport.srqPages(in);
            case Mlx5Cmd.CREATE_MKEY -> in.byteSize() < Mkey.CREATE_IN_MTT ? (int) Mkey.CREATE_IN_MTT
                    : (int) Math.min(Integer.MAX_VALUE, Mkey.CREATE_IN_MTT + 8L * Transport.mttEntries(in));
            case Mlx5Cmd.SET_HCA_CAP -> HcaCap.SET_IN_LEN;
            case Mlx5Cmd.SET_DRIVER_VERSION -> Pages.SET_DRIVER_VERSION_IN_LEN;
            case Mlx5Cmd.GEN_EQE -> Eq.GEN_EQE_IN_LEN;
            case Mlx5Cmd.MANAGE_PAGES -> (int) Math.min(Integer.MAX_VALUE,
                    Pages.MANAGE_IN_PAS + ((in.get(BE32, 4) & 0xffff) == Pages.MANAGE_GIVE ? 8L * (in.get(BE32, Pages.MANAGE_IN_NUM_ENTRIES) & 0xffff_ffffL) : 0));
            case Mlx5Cmd.CREATE_EQ -> in.byteSize() < Eq.CREATE_EQ_IN_PAS ? (int) Eq.CREATE_EQ_IN_PAS
                    : (int) Eq.CREATE_EQ_IN_PAS + 8 * eqPages(in);
            default -> -1;
        };
    }

    private static int eqPages(MemorySegment in) {
        long c = Eq.CREATE_EQ_IN_EQC;
        long bytes = (long) Eq.EQE_SIZE << Math.min(31, Eq.EQC_LOG_EQ_SIZE.get(in, c));
        long page = 4096L << Math.min(20, Eq.EQC_LOG_PAGE_SIZE.get(in, c));
        return (int) Math.min(1 << 20, (bytes + page - 1) / page);
    }

    private static int outputLength(int opcode) {
        return switch (opcode) {
            case Mlx5Cmd.QUERY_ISSI -> Mlx5Cmd.QUERY_ISSI_OUT_LEN;
            case Mlx5Cmd.QUERY_HCA_CAP -> HcaCap.QUERY_OUT_LEN;
            case Mlx5Cmd.QUERY_EQ -> Eq.QUERY_EQ_OUT_LEN;
            case Mlx5Cmd.QUERY_CQ -> (int) Cq.CREATE_CQ_IN_PAS;
            case Mlx5Cmd.QUERY_QP -> Qp.QUERY_OUT_LEN;
            case Mlx5Cmd.QUERY_HCA_VPORT_CONTEXT -> Vport.CONTEXT_OUT_LEN;
            case Mlx5Cmd.QUERY_HCA_VPORT_GID -> Vport.GID_OUT_LEN;
            case Mlx5Cmd.QUERY_SPECIAL_CONTEXTS -> Mkey.SPECIAL_CONTEXTS_OUT_LEN;
            case Mlx5Cmd.QUERY_SRQ, Mlx5Cmd.QUERY_XRC_SRQ -> Srq.QUERY_SRQ_OUT_LEN;
            default -> 16; // MANAGE_PAGES TAKE returns what fits
        };
    }

    private void run(int opcode, int opMod, MemorySegment in, MemorySegment out) throws Refused, CommandQueue.Deferred {
        if (opcode != Mlx5Cmd.QUERY_PAGES && opcode != Mlx5Cmd.MANAGE_PAGES && opcode != Mlx5Cmd.QUERY_HCA_CAP
                && opcode != Mlx5Cmd.SET_HCA_CAP && opcode != Mlx5Cmd.TEARDOWN_HCA && opcode != Mlx5Cmd.ARM_RQ && opMod != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_OP_MOD, Mlx5Cmd.name(opcode) + " has no op_mod " + opMod);
        }
        switch (opcode) {
            case Mlx5Cmd.NOP -> {
            }
            case Mlx5Cmd.ENABLE_HCA -> function(in);
            case Mlx5Cmd.DISABLE_HCA -> {
                function(in);
                if (pages.held() > 0) {
                    throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, SYND_PAGES_HELD,
                            "the firmware still holds " + pages.held() + " pages: reclaim them first");
                }
                issi = 0;
                pages.resetRequest();
                System.arraycopy(maxGeneral, 0, curGeneral, 0, HcaCap.SIZE);
                resetOdpCaps();
            }
            case Mlx5Cmd.QUERY_ISSI -> {
                out.set(BE32, 8, issi & 0xffff);
                out.set(BE32, Mlx5Cmd.QUERY_ISSI_OUT_SUPPORTED, 0b11); // ISSI 0 and 1
            }
            case Mlx5Cmd.SET_ISSI -> {
                int want = in.get(BE32, 8) & 0xffff;
                if (want != 0 && want != 1) {
                    throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_ISSI, "ISSI " + want + " is not supported (0 and 1 are)");
                }
                issi = want;
            }
            case Mlx5Cmd.QUERY_PAGES -> {
                function(in);
                FirmwarePages.Kind k = switch (opMod) {
                    case Pages.QUERY_BOOT -> FirmwarePages.Kind.BOOT;
                    case Pages.QUERY_INIT -> FirmwarePages.Kind.INIT;
                    case Pages.QUERY_REGULAR -> FirmwarePages.Kind.REGULAR;
                    default -> throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_OP_MOD, "QUERY_PAGES op_mod " + opMod);
                };
                Pages.FUNCTION_ID.set(out, 0, 0);
                out.set(BE32, Pages.QUERY_OUT_NUM_PAGES, pages.query(k));
            }
            case Mlx5Cmd.MANAGE_PAGES -> managePages(opMod, in, out);
            case Mlx5Cmd.QUERY_HCA_CAP -> {
                int type = opMod >>> 1;
                boolean max = (opMod & 1) == HcaCap.MODE_MAX;
                byte[] block = switch (type) {
                    case HcaCap.TYPE_GENERAL -> max ? maxGeneral : curGeneral;
                    case HcaCap.TYPE_ODP -> max ? maxOdp : curOdp;
                    default -> throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_CAP, "capability type " + type + " is not reported by this model");
                };
                MemorySegment.copy(MemorySegment.ofArray(block), 0, out, HcaCap.OFFSET, HcaCap.SIZE);
            }
            case Mlx5Cmd.SET_HCA_CAP -> setCaps(opMod, in);
            case Mlx5Cmd.INIT_HCA -> {
                if (pages.query(FirmwarePages.Kind.BOOT) > 0 || pages.query(FirmwarePages.Kind.INIT) > 0) {
                    throw new Refused(Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, SYND_PAGES_MISSING, "INIT_HCA before the boot and init pages were given");
                }
            }
            case Mlx5Cmd.TEARDOWN_HCA -> teardown(in, out);
            case Mlx5Cmd.SET_DRIVER_VERSION -> {
                byte[] v = new byte[Pages.DRIVER_VERSION_LEN];
                MemorySegment.copy(in, ValueLayout.JAVA_BYTE, Pages.DRIVER_VERSION_IN, v, 0, v.length);
                int n = 0;
                while (n < v.length && v[n] != 0) {
                    n++;
                }
                driverVersion = new String(v, 0, n, StandardCharsets.US_ASCII);
            }
            case Mlx5Cmd.ALLOC_UAR -> {
                int u = uars.nextClearBit(FIRST_UAR);
                if (u >= uarPages) {
                    throw new Refused(Mlx5Cmd.STAT_LIM_ERR, SYND_LIMIT, "all " + (uarPages - FIRST_UAR) + " UAR pages are allocated");
                }
                uars.set(u);
                Pages.INDEX24.set(out, 0, u);
            }
            case Mlx5Cmd.DEALLOC_UAR -> {
                int u = Pages.INDEX24.get(in, 0);
                if (u < FIRST_UAR || !uars.get(u)) {
                    throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, SYND_NO_SUCH_OBJECT, "UAR " + u + " is not allocated");
                }
                for (int i = 0; i < eqs.length(); i++) {
                    HwEq e = eqs.get(i);
                    if (e != null && e.uarPage == u) {
                        throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, SYND_OBJECTS_LIVE, "UAR " + u + " rings EQ " + i);
                    }
                }
                uars.clear(u);
            }
            case Mlx5Cmd.ALLOC_PD -> {
                int pd = pds.nextClearBit(1);
                if (pd >= 1 << HcaCap.LOG_MAX_PD.get(MemorySegment.ofArray(curGeneral), 0)) {
                    throw new Refused(Mlx5Cmd.STAT_LIM_ERR, SYND_LIMIT, "PD limit reached");
                }
                pds.set(pd);
                Pages.INDEX24.set(out, 0, pd);
            }
            case Mlx5Cmd.ALLOC_XRCD -> {
                int x = xrcds.nextClearBit(1);
                if (x >= 1 << HcaCap.LOG_MAX_XRCD.get(MemorySegment.ofArray(curGeneral), 0)) {
                    throw new Refused(Mlx5Cmd.STAT_LIM_ERR, SYND_LIMIT, "XRC domain limit reached");
                }
                xrcds.set(x);
                Pages.INDEX24.set(out, 0, x);
            }
            case Mlx5Cmd.DEALLOC_XRCD -> {
                int x = Pages.INDEX24.get(in, 0);
                if (!xrcdAllocated(x)) {
                    throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, SYND_NO_SUCH_OBJECT, "XRC domain " + x + " is not allocated");
                }
                xrcds.clear(x);
            }
            case Mlx5Cmd.DEALLOC_PD -> {
                int pd = Pages.INDEX24.get(in, 0);
                if (pd == 0 || !pds.get(pd)) {
                    throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, SYND_NO_SUCH_OBJECT, "PD " + pd + " is not allocated");
                }
                pds.clear(pd);
            }
            case Mlx5Cmd.CREATE_EQ -> createEq(in, out);
            case Mlx5Cmd.DESTROY_EQ -> {
                HwEq e = liveEq(in.get(ValueLayout.JAVA_BYTE, Eq.EQN_IN) & 0xff);
                eqs.set(e.eqn, null);
                pages.free(e.context);
                if (e.wants(Eq.EVENT_PAGE_FAULT)) {
                    pageFaults.eqsChanged();
                }
            }
            case Mlx5Cmd.QUERY_EQ -> {
                HwEq e = liveEq(in.get(ValueLayout.JAVA_BYTE, Eq.EQN_IN) & 0xff);
                try { // the context as the firmware keeps it, read back from its page
                    port.read(e.context.addr(), out, Eq.CREATE_EQ_IN_EQC, Eq.EQC_SIZE);
                    port.read(e.context.addr() + Eq.EQC_SIZE, out, Eq.CREATE_EQ_IN_EVENT_BITMASK, 8);
                } catch (IommuFault f) {
                    throw new Refused(Mlx5Cmd.STAT_INT_ERR, SYND_BAD_PAGE, "the EQ's context page is no longer mapped for the device");
                }
                Eq.EQC_ST.set(out, Eq.CREATE_EQ_IN_EQC, e.state());
                Eq.EQC_CONSUMER_COUNTER.set(out, Eq.CREATE_EQ_IN_EQC, e.consumer() & 0xff_ffff);
                Eq.EQC_PRODUCER_COUNTER.set(out, Eq.CREATE_EQ_IN_EQC, e.producer() & 0xff_ffff);
            }
            case Mlx5Cmd.GEN_EQE -> {
                HwEq e = liveEq(in.get(ValueLayout.JAVA_BYTE, Eq.EQN_IN) & 0xff);
                MemorySegment eqe = in.asSlice(Eq.GEN_EQE_IN_EQE, Eq.EQE_SIZE);
                if (e.post(port, eqe.get(ValueLayout.JAVA_BYTE, Eq.EQE_TYPE) & 0xff, eqe.get(ValueLayout.JAVA_BYTE, Eq.EQE_SUB_TYPE) & 0xff,
                        eqe.asSlice(Eq.EQE_DATA, 28))) {
                    e.raise(fn);
                }
            }
            case Mlx5Cmd.QUERY_HCA_VPORT_CONTEXT -> vportContext(in, out);
            case Mlx5Cmd.QUERY_HCA_VPORT_GID -> vportGid(in, out);
            default -> dataPath(opcode, in, out);
        }
    }

    /** The data-path commands, executed by {@link Transport}. */
    private void dataPath(int opcode, MemorySegment in, MemorySegment out) throws Refused, CommandQueue.Deferred {
        MemorySegment cur = MemorySegment.ofArray(curGeneral);
        switch (opcode) {
                case Mlx5Cmd.CREATE_CQ -> transport.createCq(in, out, HcaCap.LOG_MAX_CQ_SZ.get(cur, 0));
                case Mlx5Cmd.DESTROY_CQ -> transport.destroyCq(in);
                case Mlx5Cmd.QUERY_CQ -> transport.queryCq(in, out);
                case Mlx5Cmd.CREATE_QP -> transport.createQp(in, out, HcaCap.LOG_MAX_QP_SZ.get(cur, 0));
                case Mlx5Cmd.RST2INIT_QP, Mlx5Cmd.INIT2INIT_QP, Mlx5Cmd.INIT2RTR_QP, Mlx5Cmd.RTR2RTS_QP, Mlx5Cmd.RTS2RTS_QP,
                        Mlx5Cmd.SQERR2RTS_QP, Mlx5Cmd.QP_2ERR, Mlx5Cmd.QP_2RST -> transport.modifyQp(opcode, in);
                case Mlx5Cmd.QUERY_QP -> transport.queryQp(in, out);
                case Mlx5Cmd.DESTROY_QP -> transport.destroyQp(in);
                case Mlx5Cmd.CREATE_MKEY -> transport.createMkey(in, out);
                case Mlx5Cmd.DESTROY_MKEY -> transport.destroyMkey(in);
                case Mlx5Cmd.CREATE_SRQ -> transport.createSrq(in, out, HcaCap.LOG_MAX_SRQ_SZ.get(cur, 0));
                case Mlx5Cmd.DESTROY_SRQ -> transport.destroySrq(in, false);
                case Mlx5Cmd.QUERY_SRQ -> transport.querySrq(in, out, false);
                case Mlx5Cmd.ARM_RQ -> transport.armRq(in, false);
                case Mlx5Cmd.CREATE_XRC_SRQ -> transport.createXrcSrq(in, out, HcaCap.LOG_MAX_SRQ_SZ.get(cur, 0));
                case Mlx5Cmd.DESTROY_XRC_SRQ -> transport.destroySrq(in, true);
                case Mlx5Cmd.QUERY_XRC_SRQ -> transport.querySrq(in, out, true);
                case Mlx5Cmd.ARM_XRC_SRQ -> transport.armRq(in, true);
                case Mlx5Cmd.PAGE_FAULT_RESUME -> pageFaults.resume(in);
                case Mlx5Cmd.QUERY_SPECIAL_CONTEXTS -> {
                    // the reserved lkey (bus addresses) is key 0; no dump-fill mkey is built
                    out.set(BE32, Mkey.SPECIAL_OUT_RESD_LKEY, 0);
                    out.set(BE32, Mkey.SPECIAL_OUT_NULL_MKEY, org.peerdirect.hca.engine.HcaDevice.NULL_MKEY);
                }
                default -> throw new Refused(Mlx5Cmd.STAT_BAD_OP_ERR, SYND_UNKNOWN_OPCODE, Mlx5Cmd.name(opcode));
        }
    }

    private int port(MemorySegment in) throws Refused {
        int p = Vport.IN_PORT_NUM.get(in, 0);
        if (p != 1) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_FUNCTION, "port " + p + " does not exist (the model has port 1)");
        }
        return p;
    }

    private void vportContext(MemorySegment in, MemorySegment out) throws Refused {
        org.peerdirect.hca.engine.HcaPort p = transport.engine.port(port(in));
        long c = Vport.OUT_CONTEXT;
        Vport.PORT_STATE.set(out, c, p.active() ? Vport.PORT_ACTIVE : Vport.PORT_DOWN);
        Vport.VPORT_STATE.set(out, c, p.active() ? Vport.PORT_ACTIVE : Vport.PORT_DOWN);
        Vport.PORT_PHYSICAL_STATE.set(out, c, p.active() ? Vport.PHYS_LINK_UP : Vport.PHYS_DISABLED);
        out.set(BE64, c + Vport.NODE_GUID, nodeGuid());
        out.set(BE64, c + Vport.PORT_GUID, nodeGuid() + 1);
        if (!ethernet) { // an Ethernet port has no LID and no SM
            Vport.LID.set(out, c, p.lid());
            Vport.SM_LID.set(out, c, 1);
        }
    }

    private void vportGid(MemorySegment in, MemorySegment out) throws Refused {
        org.peerdirect.hca.engine.HcaPort p = transport.engine.port(port(in));
        int index = Vport.IN_GID_INDEX.get(in, 0);
        if (index != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_LIMIT, "GID index " + index + ": the table has one entry");
        }
        if (ethernet) { // RoCE v2: the port's IPv4 address, IPv4-mapped
            MemorySegment.copy(Roce.gidOf(p.lid()), 0, out, ValueLayout.JAVA_BYTE, Vport.OUT_GID, 16);
        } else { // the link-local prefix and the port GUID
            out.set(BE64, Vport.OUT_GID, 0xfe80_0000_0000_0000L);
            out.set(BE64, Vport.OUT_GID + 8, nodeGuid() + 1);
        }
    }

    /** The node GUID: Mellanox's OUI with the port's fabric endpoint. */
    long nodeGuid() {
        return 0x0002_c903_0000_0000L | (ethernet ? 0x10_0000L : 0) | transport.engine.port(1).lid();
    }

    /** This PF is function 0; the model has no VFs and no embedded CPU. */
    private static void function(MemorySegment in) throws Refused {
        int f = Pages.FUNCTION_ID.get(in, 0);
        if (f != 0 || (in.get(BE32, 8) & 0x8000_0000) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_FUNCTION, "function " + f + " does not exist (the model has one PF, 0)");
        }
    }

    private void managePages(int opMod, MemorySegment in, MemorySegment out) throws Refused {
        function(in);
        long n = in.get(BE32, Pages.MANAGE_IN_NUM_ENTRIES) & 0xffff_ffffL;
        switch (opMod) {
            case Pages.MANAGE_CANT_GIVE -> pages.cantGive();
            case Pages.MANAGE_GIVE -> {
                long[] pas = new long[(int) n];
                for (int i = 0; i < n; i++) {
                    pas[i] = in.get(BE64, Pages.MANAGE_IN_PAS + 8L * i);
                }
                String bad = pages.give(pas);
                if (bad != null) {
                    throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_PAGE, bad);
                }
            }
            case Pages.MANAGE_TAKE -> {
                int room = (int) ((out.byteSize() - Pages.MANAGE_OUT_PAS) / 8);
                long[] taken = pages.take((int) Math.min(n, room), state == HcaState.INITIALIZED);
                out.set(BE32, Pages.MANAGE_OUT_NUM_ENTRIES, taken.length);
                for (int i = 0; i < taken.length; i++) {
                    out.set(BE64, Pages.MANAGE_OUT_PAS + 8L * i, taken[i]);
                }
            }
            default -> throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_OP_MOD, "MANAGE_PAGES op_mod " + opMod);
        }
    }

    private void setCaps(int opMod, MemorySegment in) throws Refused {
        if ((opMod & 1) == 0 && opMod >>> 1 == HcaCap.TYPE_ODP) {
            setOdpCaps(in);
            return;
        }
        if ((opMod & 1) != 0 || opMod >>> 1 != HcaCap.TYPE_GENERAL) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_CAP, "SET_HCA_CAP op_mod 0x" + Integer.toHexString(opMod)
                    + ": only the general (type 0) and ODP (type 2) capabilities can be set");
        }
        MemorySegment max = MemorySegment.ofArray(maxGeneral);
        for (IfcField f : EDITABLE) {
            int v = f.get(in, HcaCap.OFFSET);
            if (Integer.compareUnsigned(v, f.get(max, 0)) > 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_CAP,
                        String.format("capability at bit 0x%x: %d is above the maximum %d", f.bitOffset(), v, f.get(max, 0)));
            }
        }
        MemorySegment cur = MemorySegment.ofArray(curGeneral);
        for (IfcField f : EDITABLE) {
            f.set(cur, 0, f.get(in, HcaCap.OFFSET));
        }
    }

    private void teardown(MemorySegment in, MemorySegment out) throws Refused {
        int profile = Pages.TEARDOWN_PROFILE.get(in, 0);
        if (profile != Pages.TEARDOWN_GRACEFUL && profile != Pages.TEARDOWN_FORCE_CLOSE) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_OP_MOD, "TEARDOWN_HCA profile " + profile + " is not supported");
        }
        int live = eqCount() + uars.cardinality() + pds.cardinality() + xrcds.cardinality() + transport.live();
        if (live > 0 && profile == Pages.TEARDOWN_GRACEFUL) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, SYND_OBJECTS_LIVE, String.format(
                    "TEARDOWN_HCA with %d EQs, %d UARs, %d PDs, %d CQs, %d QPs, %d SRQs and %d mkeys live: destroy them first", eqCount(),
                    uars.cardinality(), pds.cardinality(), transport.cqCount(), transport.qpCount(), transport.srqCount(), transport.mkeyCount()));
        }
        transport.dropAll();
        for (int i = 0; i < eqs.length(); i++) {
            eqs.set(i, null);
        }
        uars.clear();
        pds.clear();
        xrcds.clear();
        pages.freeAll();
        driverVersion = "";
    }

    private HwEq liveEq(int eqn) throws Refused {
        HwEq e = eq(eqn);
        if (e == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, SYND_NO_SUCH_OBJECT, "EQ " + eqn + " does not exist");
        }
        return e;
    }

    private void createEq(MemorySegment in, MemorySegment out) throws Refused, CommandQueue.Deferred {
        long c = Eq.CREATE_EQ_IN_EQC;
        MemorySegment cur = MemorySegment.ofArray(curGeneral);
        int logSize = Eq.EQC_LOG_EQ_SIZE.get(in, c);
        int lps = Eq.EQC_LOG_PAGE_SIZE.get(in, c);
        int uar = Eq.EQC_UAR_PAGE.get(in, c);
        int intr = Eq.EQC_INTR.get(in, c);
        if (logSize > HcaCap.LOG_MAX_EQ_SZ.get(cur, 0)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_EQ, "log_eq_size " + logSize + " is above log_max_eq_sz");
        }
        if (lps != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_EQ, "log_page_size " + lps + ": the model takes 4 KiB EQ pages");
        }
        if (uar < FIRST_UAR || !uars.get(uar)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_NO_SUCH_OBJECT, "uar_page " + uar + " is not allocated");
        }
        if (intr >= fn.msixVectors()) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_EQ, "intr " + intr + ": the function has " + fn.msixVectors() + " MSI-X vectors");
        }
        int n = eqPages(in);
        long[] pas = new long[n];
        for (int i = 0; i < n; i++) {
            pas[i] = in.get(BE64, Eq.CREATE_EQ_IN_PAS + 8L * i);
            if ((pas[i] & 0xfff) != 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_PAGE, String.format("pas[%d] 0x%x is not 4 KiB aligned", i, pas[i]));
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
            throw new Refused(Mlx5Cmd.STAT_LIM_ERR, SYND_LIMIT, "all " + eqs.length() + " EQs exist (log_max_eq)");
        }
        FirmwarePages.Slot ctx;
        try {
            ctx = pages.alloc(EQ_CONTEXT_BYTES);
        } catch (FirmwarePages.Exhausted e) {
            if (mayDefer) {
                throw new CommandQueue.Deferred(); // parked until the driver answers the page request
            }
            throw new Refused(Mlx5Cmd.STAT_NO_RES_ERR, SYND_NO_PAGES, "no firmware page free for the EQ's context and none can be asked for");
        }
        // the context lives in the firmware's pages: written there by DMA, read back by QUERY_EQ
        MemorySegment ctxBytes = MemorySegment.ofArray(new byte[Eq.EQC_SIZE + 8]);
        MemorySegment.copy(in, c, ctxBytes, 0, Eq.EQC_SIZE);
        MemorySegment.copy(in, Eq.CREATE_EQ_IN_EVENT_BITMASK, ctxBytes, Eq.EQC_SIZE, 8);
        try {
            port.write(ctx.addr(), ctxBytes, 0, ctxBytes.byteSize());
        } catch (IommuFault f) {
            pages.free(ctx);
            throw new Refused(Mlx5Cmd.STAT_INT_ERR, SYND_BAD_PAGE, "a firmware page is no longer mapped for the device");
        }
        long mask = in.get(BE64, Eq.CREATE_EQ_IN_EVENT_BITMASK);
        eqs.set(eqn, new HwEq(eqn, logSize, pas, uar, intr, mask, ctx));
        out.set(ValueLayout.JAVA_BYTE, Eq.CREATE_EQ_OUT_EQN, (byte) eqn);
        if ((mask & 1L << Eq.EVENT_PAGE_FAULT) != 0) {
            pageFaults.eqsChanged();
        }
    }

    /**
     * {@code SET_HCA_CAP} of the ODP block ({@code handle_hca_cap_odp}): each transport's bits, none
     * beyond the maximum (the rest of the block is read-only).
     */
    private void setOdpCaps(MemorySegment in) throws Refused {
        MemorySegment max = MemorySegment.ofArray(maxOdp);
        for (IfcField f : ODP_TRANSPORTS) {
            int extra = f.get(in, HcaCap.OFFSET) & ~f.get(max, 0);
            if (extra != 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_CAP, String.format(
                        "ODP capability at bit 0x%x: bits 0x%x are not supported (maximum 0x%x)", f.bitOffset(), extra, f.get(max, 0)));
            }
        }
        MemorySegment cur = MemorySegment.ofArray(curOdp);
        for (IfcField f : ODP_TRANSPORTS) {
            f.set(cur, 0, f.get(in, HcaCap.OFFSET));
        }
    }

    /** Whether a deferred command can still hope for pages: a page-request EQ exists and requests are enabled. */
    boolean canRequestPages() {
        return HcaCap.PAGE_REQUEST_DISABLE.get(MemorySegment.ofArray(curGeneral), 0) == 0 && eqFor(Eq.EVENT_PAGE_REQUEST) != null;
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

    /** Posts an event to its EQ, if one is subscribed, and raises the vector when the EQ was armed. */
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

    /**
     * Raises the page request the pages' water marks call for, if any and if it can be delivered.
     * A request whose EQE found the EQ full is not outstanding: it is raised again on a later call
     * (the firmware loop retries while a command waits for pages), so a parked command cannot wait
     * for a request that was lost (found by the command fuzzer).
     */
    void requestPages() {
        if (state != HcaState.INITIALIZED || !canRequestPages()) {
            return;
        }
        int n = pages.request();
        if (n != 0) {
            MemorySegment d = MemorySegment.ofArray(new byte[28]);
            d.set(BE32, Eq.PAGE_REQ_NUM_PAGES - Eq.EQE_DATA, n); // func_id 0
            if (!postEvent(Eq.EVENT_PAGE_REQUEST, 0, d)) {
                pages.resetRequest();
            }
        }
    }
}
