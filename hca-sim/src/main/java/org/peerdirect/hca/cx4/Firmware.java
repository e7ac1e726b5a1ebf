package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The firmware's command execution: the checks every command passes (a known opcode, the
 * function's state ({@link HcaState}), input and output lengths, {@code op_mod}), then the handler
 * its object's file registered in the {@link CommandTable}: capabilities ({@link Caps}), UARs, PDs
 * and XRC domains ({@link Allocations}), EQs ({@link Eqs}), the vport ({@link Vports}), CQs, QPs,
 * SRQs and mkeys ({@link Transport}), page-fault resumes ({@link PageFaults}). This file keeps the
 * function-level commands: {@code ENABLE_HCA}/{@code DISABLE_HCA}, ISSI, the pages the driver
 * gives ({@link FirmwarePages}), {@code INIT_HCA}/{@code TEARDOWN_HCA}, the driver version.
 *
 * <p>Every command gets a status and a syndrome that names the check that failed
 * ({@link Syndromes}); nothing here throws to the queue but {@link CommandQueue.Deferred}, which
 * parks a command until the driver answers a page request.
 *
 * <p>Lock rules: the firmware thread alone calls everything here; the BAR write handler (the
 * driver's thread) reaches only {@link Eqs#eq} and the data path's doorbells, which guard themselves.
 */
final class Firmware implements CommandQueue.Executor {

    final FirmwarePages pages;
    final Caps caps;
    final Allocations allocations;
    final Eqs eqs;
    /** The data path: CQs, QPs, SRQs, mkeys over the shared engine (firmware thread for commands). */
    final Transport transport;
    /** Page-fault EQEs and PAGE_FAULT_RESUME. */
    final PageFaults pageFaults;
    /** DevX (BlueField-3): user contexts with the uid of each command and object, umems, the general-object dispatcher. */
    final Uctxs uctxs;
    final Umems umems;
    final GeneralObjects generalObjects;
    /** The BlueField-3's DPA and its objects; null on a ConnectX-4 or ConnectX-6 Dx. */
    final FirmwareDpa dpa;
    private final CommandTable table = new CommandTable();
    private HcaState state = HcaState.DISABLED;
    private int issi;
    private String driverVersion = "";
    /** Why the last command was refused (for the model's log and tests). */
    private String lastRefusal = "";
    private int lastOpcode = -1;

    Firmware(PciFunction fn, DmaPort port, boolean ethernet, int uarPages, HcaDevice engine) {
        this(fn, port, ethernet, false, uarPages, engine);
    }

    /** {@code bluefield3}: the function reports DevX and the DPA. */
    Firmware(PciFunction fn, DmaPort port, boolean ethernet, boolean bluefield3, int uarPages, HcaDevice engine) {
        this.pages = new FirmwarePages(port);
        this.caps = new Caps(ethernet, bluefield3, uarPages);
        this.uctxs = new Uctxs(caps);
        this.umems = new Umems(port, caps, uctxs);
        this.allocations = new Allocations(uarPages, caps, uctxs);
        this.eqs = new Eqs(fn, port, caps, allocations, pages);
        this.generalObjects = new GeneralObjects(caps, uctxs, eqs);
        this.transport = new Transport(engine, port, eqs, allocations, caps, pages, umems);
        this.pageFaults = new PageFaults(eqs, engine, transport::faultWqeIndex);
        this.dpa = bluefield3 ? new FirmwareDpa(transport, uctxs, eqs, generalObjects, engine, umems, pages) : null;
        eqs.onPageFaultEqsChanged(pageFaults::eqsChanged);
        register(table);
        caps.register(table);
        allocations.register(table, eqs::eqOfUar);
        eqs.register(table);
        new Vports(engine, ethernet).register(table);
        new VportCounters(engine).register(table);
        new Registers(engine).register(table);
        transport.register(table);
        pageFaults.register(table);
        uctxs.register(table, generalObjects::owned);
        umems.register(table);
        generalObjects.register(table);
    }

    /** The function-level commands. */
    private void register(CommandTable t) {
        t.add(Mlx5Cmd.NOP, (opMod, in, out) -> {
        });
        t.add(Mlx5Cmd.ENABLE_HCA, (opMod, in, out) -> function(in));
        t.add(Mlx5Cmd.DISABLE_HCA, (opMod, in, out) -> disable(in));
        t.add(Mlx5Cmd.QUERY_ISSI, CommandTable.MIN_INPUT, Mlx5Cmd.QUERY_ISSI_OUT_LEN, (opMod, in, out) -> {
            out.set(BE32, 8, issi & 0xffff);
            out.set(BE32, Mlx5Cmd.QUERY_ISSI_OUT_SUPPORTED, 0b11); // ISSI 0 and 1
        });
        t.add(Mlx5Cmd.SET_ISSI, (opMod, in, out) -> setIssi(in));
        t.add(Mlx5Cmd.QUERY_PAGES, in -> CommandTable.MIN_INPUT, CommandTable.MIN_OUTPUT, true, (opMod, in, out) -> queryPages(opMod, in, out));
        // MANAGE_PAGES TAKE returns what fits in the output the driver gave
        t.add(Mlx5Cmd.MANAGE_PAGES, Firmware::managePagesInput, CommandTable.MIN_OUTPUT, true, this::managePages);
        t.add(Mlx5Cmd.INIT_HCA, (opMod, in, out) -> { // sw_owner_id (0x10..0x1f) only when that cap is set, which the model does not report
            if (pages.query(FirmwarePages.Kind.BOOT) > 0 || pages.query(FirmwarePages.Kind.INIT) > 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, Syndromes.SYND_PAGES_MISSING, "INIT_HCA before the boot and init pages were given");
            }
        });
        t.add(Mlx5Cmd.TEARDOWN_HCA, in -> CommandTable.MIN_INPUT, CommandTable.MIN_OUTPUT, true, (opMod, in, out) -> teardown(in));
        t.add(Mlx5Cmd.SET_DRIVER_VERSION, Pages.SET_DRIVER_VERSION_IN_LEN, CommandTable.MIN_OUTPUT, (opMod, in, out) -> setDriverVersion(in));
    }

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
            CommandTable.Entry e = table.get(opcode);
            if (e == null) {
                throw new Refused(Mlx5Cmd.STAT_BAD_OP_ERR, Syndromes.SYND_UNKNOWN_OPCODE, Mlx5Cmd.name(opcode));
            }
            int inNeed = e.inputLength().applyAsInt(in);
            HcaState next = state.next(opcode);
            if (next == null) {
                throw new Refused(Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, Syndromes.SYND_BAD_STATE, Mlx5Cmd.name(opcode) + " in state " + state);
            }
            if (in.byteSize() < inNeed) {
                throw new Refused(Mlx5Cmd.STAT_BAD_INP_LEN_ERR, Syndromes.SYND_SHORT_INPUT,
                        Mlx5Cmd.name(opcode) + " needs " + inNeed + " input bytes, has " + in.byteSize());
            }
            if (out.byteSize() < e.outputLength()) {
                throw new Refused(Mlx5Cmd.STAT_BAD_OUTP_LEN_ERR, Syndromes.SYND_SHORT_OUTPUT,
                        Mlx5Cmd.name(opcode) + " needs " + e.outputLength() + " output bytes, has " + out.byteSize());
            }
            if (!e.takesOpMod() && opMod != 0) {
                throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD, Mlx5Cmd.name(opcode) + " has no op_mod " + opMod);
            }
            uctxs.begin(opcode, in);
            try {
                e.handler().run(opMod, in, out);
            } finally {
                uctxs.end();
            }
            state = next;
            CommandQueue.status(out, Mlx5Cmd.STAT_OK, 0);
        } catch (Refused r) {
            lastRefusal = r.getMessage();
            out.fill((byte) 0);
            CommandQueue.status(out, r.status, r.syndrome);
        }
    }

    /** {@code MANAGE_PAGES}' input: the page list only when giving. */
    private static int managePagesInput(MemorySegment in) {
        return (int) Math.min(Integer.MAX_VALUE, Pages.MANAGE_IN_PAS
                + ((in.get(BE32, 4) & 0xffff) == Pages.MANAGE_GIVE ? 8L * (in.get(BE32, Pages.MANAGE_IN_NUM_ENTRIES) & 0xffff_ffffL) : 0));
    }

    /** This PF is function 0; the model has no VFs and no embedded CPU. */
    private static void function(MemorySegment in) throws Refused {
        int f = Pages.FUNCTION_ID.get(in, 0);
        if (f != 0 || (in.get(BE32, 8) & 0x8000_0000) != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_FUNCTION, "function " + f + " does not exist (the model has one PF, 0)");
        }
    }

    private void disable(MemorySegment in) throws Refused {
        function(in);
        if (pages.held() > 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_PAGES_HELD,
                    "the firmware still holds " + pages.held() + " pages: reclaim them first");
        }
        issi = 0;
        pages.resetRequest();
        caps.reset();
    }

    private void setIssi(MemorySegment in) throws Refused {
        int want = in.get(BE32, 8) & 0xffff;
        if (want != 0 && want != 1) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_ISSI, "ISSI " + want + " is not supported (0 and 1 are)");
        }
        issi = want;
    }

    private void queryPages(int opMod, MemorySegment in, MemorySegment out) throws Refused {
        function(in);
        FirmwarePages.Kind k = switch (opMod) {
            case Pages.QUERY_BOOT -> FirmwarePages.Kind.BOOT;
            case Pages.QUERY_INIT -> FirmwarePages.Kind.INIT;
            case Pages.QUERY_REGULAR -> FirmwarePages.Kind.REGULAR;
            default -> throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD, "QUERY_PAGES op_mod " + opMod);
        };
        Pages.FUNCTION_ID.set(out, 0, 0);
        out.set(BE32, Pages.QUERY_OUT_NUM_PAGES, pages.query(k));
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
                    throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_PAGE, bad);
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
            default -> throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD, "MANAGE_PAGES op_mod " + opMod);
        }
    }

    private void setDriverVersion(MemorySegment in) {
        byte[] v = new byte[Pages.DRIVER_VERSION_LEN];
        MemorySegment.copy(in, ValueLayout.JAVA_BYTE, Pages.DRIVER_VERSION_IN, v, 0, v.length);
        int n = 0;
        while (n < v.length && v[n] != 0) {
            n++;
        }
        driverVersion = new String(v, 0, n, StandardCharsets.US_ASCII);
    }

    private void teardown(MemorySegment in) throws Refused {
        int profile = Pages.TEARDOWN_PROFILE.get(in, 0);
        if (profile != Pages.TEARDOWN_GRACEFUL && profile != Pages.TEARDOWN_FORCE_CLOSE) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OP_MOD, "TEARDOWN_HCA profile " + profile + " is not supported");
        }
        int live = eqs.count() + allocations.live() + transport.live() + uctxs.live() + umems.count() + generalObjects.count();
        if (live > 0 && profile == Pages.TEARDOWN_GRACEFUL) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE, String.format(
                    "TEARDOWN_HCA with %d EQs, %d UARs, %d PDs, %d CQs, %d QPs, %d SRQs, %d mkeys, %d user contexts, %d umems and %d general objects "
                            + "live: destroy them first", eqs.count(), allocations.uarsAllocated(), allocations.pdsAllocated(), transport.cqCount(),
                    transport.qpCount(), transport.srqCount(), transport.mkeyCount(), uctxs.live(), umems.count(), generalObjects.count()));
        }
        if (dpa != null) {
            dpa.drop(); // the EUs stop before the queues and keys their handlers ring and read go
        }
        transport.dropAll();
        generalObjects.clear();
        umems.clear();
        uctxs.clear();
        eqs.clear();
        allocations.clear();
        pages.freeAll();
        driverVersion = "";
    }

    /** Whether a deferred command can still hope for pages: a page-request EQ exists and requests are enabled. */
    boolean canRequestPages() {
        return caps.cur(HcaCap.PAGE_REQUEST_DISABLE) == 0 && eqs.eqFor(Eq.EVENT_PAGE_REQUEST) != null;
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
            if (!eqs.postEvent(Eq.EVENT_PAGE_REQUEST, 0, d)) {
                pages.resetRequest();
            }
        }
    }
}
