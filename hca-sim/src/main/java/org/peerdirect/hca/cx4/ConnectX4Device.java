package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.InitSeg;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.kernel.pci.BarWriteHandler;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * A ConnectX-4+ function (PCI {@code 15b3:1013} ConnectX-4, {@code 15b3:101d} ConnectX-6 Dx,
 * {@code 15b3:a2dc} BlueField-3 integrated ConnectX-7, the one that reports DevX and a DPA) as
 * its driver sees it: BAR0 with the big-endian initialization segment, the command queue the
 * driver places in its memory, a firmware thread executing commands read by DMA through the
 * function's IOMMU domain. No direct firmware calls: the driver reaches it only by MMIO, DMA and
 * MSI-X.
 *
 * <p>Built so far (issue 11): the initialization segment (firmware revision, command interface
 * revision 5, the command queue address with log size 5 and log stride 6, the doorbell vector,
 * the initializing bit, the health buffer and counter), the command queue with its descriptor and
 * mailbox checks, and the firmware of {@link Firmware}: the function's state, ISSI, firmware
 * pages with page-request events, the general capabilities, {@code INIT_HCA}/{@code TEARDOWN_HCA},
 * UARs, PDs and EQs with their doorbells, MSI-X and command-completion events. Not built yet:
 * CQs, QPs, SRQs, mkeys and the data path (the opcodes answer {@code BAD_OP}).
 *
 * <p>Lock rules: the firmware thread alone executes commands and owns the HCA state; the BAR
 * write handler (the driver's thread) queues command doorbells and rings EQ doorbells, which an
 * EQ guards itself ({@link HwEq}).
 */
public final class ConnectX4Device implements AutoCloseable {

    public static final int VENDOR_MELLANOX = 0x15b3;
    public static final int DEVICE_CONNECTX4 = 0x1013;
    public static final int DEVICE_CONNECTX6DX = 0x101d;
    /** "BlueField-3 integrated ConnectX-7 network controller" ({@code mlx5_core_pci_table}). */
    public static final int DEVICE_BLUEFIELD3 = 0xa2dc;
    /** BAR0: the initialization segment, then UAR pages. */
    public static final long BAR0_SIZE = 1L << 20;
    public static final int MSIX_VECTORS = 64;
    /** The queue: 2^5 entries of 2^6 bytes, one 4 KiB page. */
    public static final int LOG_CMDQ_SIZE = 5;
    public static final int LOG_CMDQ_STRIDE = 6;
    /** Firmware revision the model reports: 16.35.1012 (ConnectX-4), 22.35.1012 (ConnectX-6 Dx), 32.35.1012 (BlueField-3). */
    static final int FW_MINOR = 35;
    static final int FW_SUBMINOR = 1012;

    /** Health syndrome the model reports for an injected fatal error ({@code MLX5_HEALTH_SYNDR_FW_ERR}). */
    public static final int HEALTH_SYNDR_FW_ERR = 0x1;

    private final String name;
    private final int deviceId;
    private volatile PciFunction fn;
    private volatile MemorySegment bar0;
    private final LinkedBlockingQueue<Integer> doorbells = new LinkedBlockingQueue<>();
    private volatile boolean closed;
    private volatile Thread firmware; // started by attach, awaited by close
    private CommandQueue cmdq;
    private volatile Firmware fw;
    /** Set by {@link #hang}: the firmware stops executing and its health counter stops. */
    private volatile boolean hung;
    /** Set by {@link #holdCommands} until {@link #releaseCommands}: the firmware takes no doorbell meanwhile. */
    private volatile java.util.concurrent.CountDownLatch held;
    /** Non-zero after {@link #fatal}: the syndrome in the health buffer. */
    private volatile int fatal;
    private final AtomicLong strayDoorbells = new AtomicLong();

    private final org.peerdirect.hca.boards.Fabric fabric;
    /** The transport engine, powered with the device (its port joins the fabric at power-on). */
    private volatile org.peerdirect.hca.engine.HcaDevice engine;
    /** The DPA's views, figures and checker mode for tests, tools and the bench ({@link DpaHooks}). */
    private final DpaHooks dpaHooks;

    public ConnectX4Device(String name, int deviceId, org.peerdirect.hca.boards.Fabric fabric) {
        this.fabric = fabric;
        if (deviceId != DEVICE_CONNECTX4 && deviceId != DEVICE_CONNECTX6DX && deviceId != DEVICE_BLUEFIELD3) {
            throw new IllegalArgumentException(String.format(
                    "%s: device id 0x%x is none of ConnectX-4 (0x1013), ConnectX-6 Dx (0x101d), BlueField-3 (0xa2dc)", name, deviceId));
        }
        this.name = name;
        this.deviceId = deviceId;
        this.dpaHooks = new DpaHooks(this, name, deviceId);
    }

    /** The model's name of a device id: "ConnectX-4", "ConnectX-6 Dx" or "BlueField-3". */
    public static String modelName(int deviceId) {
        return switch (deviceId) {
            case DEVICE_CONNECTX4 -> "ConnectX-4";
            case DEVICE_CONNECTX6DX -> "ConnectX-6 Dx";
            case DEVICE_BLUEFIELD3 -> "BlueField-3";
            default -> throw new IllegalArgumentException(String.format("device id 0x%x is no ConnectX-4+ model", deviceId));
        };
    }

    /**
     * Adds a general-object type to the firmware's dispatcher (the DPA's objects; tests), before
     * a driver uses it. Refused on a function without DevX or before power-on.
     */
    void addGeneralObjectType(GeneralObjectType t) {
        Firmware f = fw;
        if (f == null || !f.caps.devx()) {
            throw new IllegalStateException(name + ": general objects need a powered BlueField-3 (DevX)");
        }
        f.generalObjects.add(t);
    }

    /**
     * Test hook and the DPA's path to the host: general object {@code objId} of {@code objType}
     * changed ({@code OBJECT_CHANGE} EQE, {@link GeneralObjects#objectChanged}). False when the
     * object does not exist, the device has no DevX, or no EQ took the event.
     */
    public boolean objectChanged(int objType, int objId) {
        Firmware f = fw;
        return f != null && f.caps.devx() && f.generalObjects.objectChanged(objType, objId);
    }

    /** The firmware while powered, else null (the DPA hooks read it once per call). */
    Firmware firmware() {
        return fw;
    }

    /** The BlueField-3's DPA (tests, tools); refused on a device without one or before power-on. */
    FirmwareDpa dpa() {
        return dpaHooks.dpa();
    }

    /** Whether the function has a DPA (the BlueField-3). */
    public boolean hasDpa() {
        return deviceId == DEVICE_BLUEFIELD3;
    }

    /** The DPA capability block's fields by name (the console's view); empty without a DPA or power. */
    public java.util.Map<String, Long> dpaCapValues() {
        return dpaHooks.capValues();
    }

    /** {@code dpa:caps}: the DPA capability block, one {@code name value} line per field; empty without a DPA or power. */
    public java.util.List<String> dpaCaps() {
        return dpaHooks.caps();
    }

    /** {@code dpa:ps}: EUs in use, processes and their threads (each bound CQ armed or not); one line when the DPA runs nothing. */
    public java.util.List<String> dpaDescribe() {
        return dpaHooks.view(org.peerdirect.hca.dpa.DpaUnit::describe);
    }

    /** {@code dpa:eus}: one line per EU (partition, groups, state, the thread it runs); one line when the DPA runs nothing. */
    public java.util.List<String> dpaEus() {
        return dpaHooks.view(org.peerdirect.hca.dpa.DpaUnit::describeEus);
    }

    /** {@code dpa:mm}: the DPA memory model's findings per process, each with its handler line. */
    public java.util.List<String> dpaFindings() {
        return dpaHooks.view(org.peerdirect.hca.dpa.DpaUnit::describeFindings);
    }

    /** {@code dpa:crash}: each DPA process that ended with an error: status, failing thread, its last handler line, crash text. */
    public java.util.List<String> dpaCrashes() {
        return dpaHooks.view(org.peerdirect.hca.dpa.DpaUnit::describeCrashes);
    }

    /**
     * The bench's figures: percentiles {@code ps} of the wall-clock trigger → handler entry
     * nanoseconds (a CQE on an armed thread CQ to the handler's first instruction), {@code reset}
     * starting a new series; zeros before the first DPA object.
     */
    public long[] dpaWakeNanos(boolean reset, double... ps) {
        return dpaHooks.wakeNanos(reset, ps);
    }

    /** The DPA's EU counters summed: activations, virtual cycles, instructions retired; zeros before the first DPA object. */
    public long[] dpaEuTotals() {
        return dpaHooks.euTotals();
    }

    /**
     * The memory-model checker's mode of the DPA made at the first DPA object: {@code strict},
     * {@code warn} or {@code off} (the model's configuration; the bench compares their cost).
     *
     * @throws IllegalStateException once the DPA runs, or without a DPA
     */
    public void dpaCheckMode(String mode) {
        dpaHooks.checkMode(mode);
    }

    /** Polls of unchanged DPA memory wait for a write (true, the default) or spin (false: to measure what waiting saves). */
    public void dpaElidePolls(boolean elide) {
        dpaHooks.elidePolls(elide);
    }

    /** {@code dpa:threads}: one line per DPA thread with each bound CQ armed or not, and its pi and ci; one line when there is none. */
    public java.util.List<String> dpaThreads() {
        return dpaHooks.threads();
    }

    /** Whether the port is Ethernet (RoCE v2): the ConnectX-6 Dx and the BlueField-3; the ConnectX-4 is InfiniBand. */
    private boolean ethernet() {
        return deviceId != DEVICE_CONNECTX4;
    }

    /** The firmware's major number: the device generation's ({@code fw_rev_maj}). */
    private int fwMajor() {
        return switch (deviceId) {
            case DEVICE_CONNECTX6DX -> 22;
            case DEVICE_BLUEFIELD3 -> 32;
            default -> 16;
        };
    }

    /** What the function looks like on the bus: class 0x020000 (Ethernet) or 0x020700 (InfiniBand), BAR0, MSI-X. */
    public PciDeviceSpec spec() {
        return PciDeviceSpec.builder(name).vendorId(VENDOR_MELLANOX).deviceId(deviceId)
                .classCode(ethernet() ? 0x020000 : 0x020700).bar(0, BAR0_SIZE, bar0Writes)
                .msixVectors(MSIX_VECTORS).powerOn(this::attach).build();
    }

    /**
     * Powers the device up on its function (the spec's power-on reset, before the function is
     * published): the initialization segment is written with the initializing bit set, then the
     * firmware thread boots and clears it.
     */
    private synchronized void attach(PciFunction function) {
        if (fn != null) {
            throw new IllegalStateException(name + ": already attached to " + fn.bdf());
        }
        fn = function;
        bar0 = function.barMemory(0);
        int major = fwMajor();
        bar0.set(BE32, InitSeg.FW_REV, FW_MINOR << 16 | major);
        bar0.set(BE32, InitSeg.CMDIF_REV_FW_SUB, InitSeg.CMD_IF_REV << 16 | FW_SUBMINOR);
        bar0.set(BE32, InitSeg.CMDQ_ADDR_L_SZ, InitSeg.NIC_IFC_FULL << 8 | LOG_CMDQ_SIZE << 4 | LOG_CMDQ_STRIDE);
        bar0.set(BE32, InitSeg.HEALTH_FW_VER, major << 24 | FW_MINOR << 16 | FW_SUBMINOR);
        bar0.set(BE32, InitSeg.INITIALIZING, InitSeg.INITIALIZING_BIT);
        engine = new org.peerdirect.hca.engine.HcaDevice(function.bdf(), function.dmaPort(), fabric, 1, ethernet());
        fw = new Firmware(function, function.dmaPort(), ethernet(), deviceId == DEVICE_BLUEFIELD3, (int) (BAR0_SIZE >>> 12), engine);
        cmdq = new CommandQueue(function.dmaPort(), this::queueAddress, fw);
        firmware = Thread.ofPlatform().daemon().name("fw-" + function.bdf()).start(this::firmwareLoop);
        // Removal frees the BAR memory once the last MMIO access ends: whoever removes the function
        // (the model, the bus shutting down), the firmware stops first. Listeners run before the
        // driver unbinds, so the driver meets a vanished device, as in a surprise removal.
        function.addRemovalListener(this::close);
    }

    private long queueAddress() {
        return (bar0.get(BE32, InitSeg.CMDQ_ADDR_H) & 0xffff_ffffL) << 32 | bar0.get(BE32, InitSeg.CMDQ_ADDR_L_SZ) & 0xffff_f000L;
    }

    /**
     * BAR0's write handler (the driver's thread): MMIO writes, and write-combined bursts, which
     * only a UAR page's BlueFlame registers take whole (a send WQE, {@link Qps#sqBlueFlame});
     * elsewhere a burst is the 64-bit writes it is made of.
     */
    private final BarWriteHandler bar0Writes = new BarWriteHandler() {
        @Override
        public void written(int bar, long offset, int width, long value) {
            barWritten(bar, offset, width, value);
        }

        @Override
        public void writtenBurst(int bar, long offset, MemorySegment payload, long payloadOffset, int length) {
            Firmware f = fw;
            int uar = bar == 0 && bar0 != null && f != null ? f.allocations.uarOf(offset) : -1;
            if (uar < 0 || (offset & 0xfff) < Qp.UAR_BF_OFFSET) {
                BarWriteHandler.super.writtenBurst(bar, offset, payload, payloadOffset, length);
            } else if (!f.transport.qps.sqBlueFlame(uar, payload, payloadOffset, length)) {
                strayDoorbells.incrementAndGet();
            }
        }
    };

    /** A single MMIO write: keeps the read-only bits, queues command doorbells, rings UAR doorbells. */
    private void barWritten(int bar, long offset, int width, long value) {
        MemorySegment b = bar0;
        if (bar != 0 || b == null) {
            return;
        }
        if (offset == InitSeg.CMDQ_ADDR_L_SZ) {
            // the address bits are the driver's; the low bits read back the queue's geometry
            b.set(BE32, InitSeg.CMDQ_ADDR_L_SZ, (int) (value & 0xffff_f000L) | InitSeg.NIC_IFC_FULL << 8 | LOG_CMDQ_SIZE << 4
                    | LOG_CMDQ_STRIDE);
        } else if (offset == InitSeg.CMD_DBELL) {
            doorbells.add((int) value);
        } else if (fw != null && fw.allocations.uarOf(offset) >= 0) {
            uarWritten(fw.allocations.uarOf(offset), offset & 0xfff, value);
        }
    }

    /** A UAR doorbell: the EQ doorbells (be32 {@code eqn << 24 | ci}); a write for an EQ of another UAR is dropped. */
    private void uarWritten(int uar, long off, long value) {
        if (off == Cq.UAR_CQ_DOORBELL) {
            if (!fw.transport.cqs.doorbell(uar, value)) {
                strayDoorbells.incrementAndGet();
            }
            return;
        }
        if (off >= Qp.UAR_BF_OFFSET) {
            if (!fw.transport.qps.sqDoorbell(uar, value)) {
                strayDoorbells.incrementAndGet();
            }
            return;
        }
        if (off != Eq.UAR_EQ_ARM_CI && off != Eq.UAR_EQ_CI) {
            strayDoorbells.incrementAndGet();
            return;
        }
        HwEq eq = fw.eqs.eq((int) value >>> 24);
        if (eq == null || eq.uarPage != uar) {
            strayDoorbells.incrementAndGet();
            return;
        }
        if (eq.doorbell((int) value & 0xff_ffff, off == Eq.UAR_EQ_ARM_CI)) {
            eq.raise(fn);
        }
    }

    private void firmwareLoop() {
        bar0.set(BE32, InitSeg.INITIALIZING, 0); // booted: the driver may set up the command queue
        int counter = 0;
        List<Integer> parked = new ArrayList<>();
        while (!closed) {
            Integer mask;
            try {
                mask = doorbells.poll(10, TimeUnit.MILLISECONDS);
                for (java.util.concurrent.CountDownLatch h = held; h != null && !closed; h = held) {
                    // a slow firmware: the doorbell taken waits (and those after it), the health counter runs on
                    bar0.set(BE32, InitSeg.HEALTH_COUNTER, ++counter & 0xff_ffff);
                    h.await(10, TimeUnit.MILLISECONDS);
                }
            } catch (InterruptedException e) {
                return;
            }
            if (hung || fatal != 0) {
                continue; // no command runs, the counter stands still: the driver's health poll notices
            }
            bar0.set(BE32, InitSeg.HEALTH_COUNTER, ++counter & 0xff_ffff); // alive
            if (mask == null) {
                if (!parked.isEmpty()) {
                    fw.requestPages(); // a request lost on a full EQ is raised again once the driver made room
                }
                continue;
            }
            for (int slot = 0; slot < 1 << LOG_CMDQ_SIZE; slot++) {
                if ((mask & 1 << slot) != 0 && !closed && !parked.contains(slot)) {
                    run(slot, parked);
                }
            }
        }
    }

    /**
     * Runs one slot. A command short of firmware pages is parked (its entry stays with hardware)
     * while a page request can be answered; after every MANAGE_PAGES the parked commands run
     * again from their start.
     */
    private void run(int slot, List<Integer> parked) {
        Firmware f = fw;
        f.pages.mayDefer = f.canRequestPages() && !f.pages.refused();
        CommandQueue.Result r = cmdq.execute(slot);
        if (r == CommandQueue.Result.DEFERRED) {
            parked.add(slot);
        } else if (r == CommandQueue.Result.COMPLETED) {
            MemorySegment d = MemorySegment.ofArray(new byte[28]);
            d.set(BE32, 0, 1 << slot); // the completion vector
            f.eqs.postEvent(Eq.EVENT_CMD, 0, d);
            if (f.lastOpcode() == Mlx5Cmd.MANAGE_PAGES && !parked.isEmpty()) {
                List<Integer> again = new ArrayList<>(parked);
                parked.clear();
                for (int s : again) {
                    run(s, parked);
                }
            }
        }
        f.requestPages();
    }

    /**
     * Test hook and {@code mlx5:health} action: the firmware stops executing commands and its
     * health counter stops, as a firmware hang does. Only a new device (a hot-plug) recovers.
     */
    public void hang() {
        hung = true;
    }

    /**
     * Test hook: the firmware leaves the commands rung from now on with hardware until
     * {@link #releaseCommands}, as a busy firmware is slow to take them; unlike {@link #hang} its
     * health counter runs on, so the driver sees a slow device, not a dead one. A test holds a
     * command in flight for as long as the interleaving it forces needs.
     */
    public void holdCommands() {
        held = new java.util.concurrent.CountDownLatch(1);
    }

    /** Test hook: the firmware takes the commands rung meanwhile, in their order. */
    public void releaseCommands() {
        java.util.concurrent.CountDownLatch h = held;
        held = null;
        if (h != null) {
            h.countDown();
        }
    }

    /** Test hook (and {@code hca:link}): the port's link goes down or comes up; the firmware reports the change on the async EQ. */
    public void setLink(int port, boolean up) {
        org.peerdirect.hca.engine.HcaDevice e = engine;
        if (e == null) {
            throw new IllegalStateException(name + ": the device is not attached to a PCI function");
        }
        e.setPortActive(port, up);
    }

    /**
     * The port's cable becomes a real wire ({@code org.peerdirect.hca.wire.link} configurations):
     * its RoCE traffic goes as RoCEv2 frames over {@code link} with the given addresses
     * ({@link org.peerdirect.hca.engine.HcaDevice#attachWire}). Only the Ethernet kind (ConnectX-6 Dx) has one.
     */
    public org.peerdirect.hca.engine.WirePort attachWire(int port, org.peerdirect.hca.wire.Link link, int ip, long mac, int mtu) {
        org.peerdirect.hca.engine.HcaDevice e = engine;
        if (e == null) {
            throw new IllegalStateException(name + ": the device is not attached to a PCI function");
        }
        return e.attachWire(port, link, ip, mac, mtu);
    }

    /** The port back on the in-JVM fabric (its wire's link closes); nothing when it has none or the device is gone. */
    public void detachWire(int port) {
        org.peerdirect.hca.engine.HcaDevice e = engine;
        if (e != null) {
            e.detachWire(port);
        }
    }

    /** The port's wire, or null (on the in-JVM fabric, or no engine). */
    public org.peerdirect.hca.engine.WirePort wire(int port) {
        org.peerdirect.hca.engine.HcaDevice e = engine;
        return e == null || port < 1 || port > e.portCount() ? null : e.port(port).wire();
    }

    /** Test hook: the firmware reports a fatal error in its health buffer and stops executing commands. */
    public void fatal(int syndrome) {
        if (syndrome <= 0 || syndrome > 0xff) {
            throw new IllegalArgumentException("health syndrome must be 1..255, not " + syndrome);
        }
        fatal = syndrome;
        MemorySegment b = bar0;
        if (b != null) {
            b.set(ValueLayout.JAVA_BYTE, InitSeg.HEALTH_SYND, (byte) syndrome);
        }
    }

    /** MPT entries (mkeys) alive in the device (test and tool view). */
    public int mkeysAlive() {
        org.peerdirect.hca.engine.HcaDevice e = engine;
        return e == null ? 0 : e.mptCount();
    }

    /** UMR work requests the device executed (what a driver's UMR QP did). */
    public long umrsExecuted() {
        org.peerdirect.hca.engine.HcaDevice e = engine;
        return e == null ? 0 : e.umrsExecuted();
    }

    /** The engine's failures on exceptions of its own ({@link org.peerdirect.hca.engine.HcaDevice#engineFailures}; 0 before power-on). */
    public long engineFailures() {
        org.peerdirect.hca.engine.HcaDevice e = engine;
        return e == null ? 0 : e.engineFailures();
    }

    /** Send and receive WQEs the device fetched (test and tool view). */
    public long wqesFetched() {
        Firmware f = fw;
        return f == null ? 0 : f.transport.wqesFetched();
    }

    /** Of those, the send WQEs a BlueFlame write carried whole, which the device did not read by DMA. */
    public long wqesBlueFlame() {
        Firmware f = fw;
        return f == null ? 0 : f.transport.wqesBlueFlame();
    }

    /** What the model shows tools: state, pages held per kind, EQs, UARs. */
    public String describe() {
        Firmware f = fw;
        if (f == null) {
            return name + ": not attached";
        }
        return String.format("%s: state %s, ISSI %d, driver '%s', pages held %d (boot %d, init %d, regular %d), EQs %d (EQEs lost %d), UARs %d, "
                + "stray doorbells %d, %s, engine failures %d%s%s", name, f.state(), f.issi(), f.driverVersion(), f.pages.held(),
                f.pages.held(FirmwarePages.Kind.BOOT), f.pages.held(FirmwarePages.Kind.INIT), f.pages.held(FirmwarePages.Kind.REGULAR), f.eqs.count(),
                f.eqs.overruns(), f.allocations.uarsAllocated(), strayDoorbells.get(), f.transport.describe() + ", " + f.pageFaults.describe()
                        + (f.caps.devx() ? String.format(", DevX: user contexts %d, umems %d, general objects %d", f.uctxs.live(), f.umems.count(),
                                f.generalObjects.count()) : ""), engineFailures(), hung ? ", HUNG" : "",
                fatal != 0 ? ", FATAL syndrome " + fatal : "");
    }

    /** Test and tool view: the page faults waiting for their resume. */
    public java.util.List<PendingPageFault> pendingPageFaults() {
        Firmware f = fw;
        return f == null ? java.util.List.of() : f.pageFaults.waiting();
    }

    /** The page-fault unit's counters: raised, resumed, resumed with error, lost, pending. */
    public String pageFaultsDescribe() {
        Firmware f = fw;
        return f == null ? "not attached" : f.pageFaults.describe();
    }

    /** Test hook: no page fault is waiting for its resume (every queue that stopped on one went on). */
    public boolean pageFaultsSettled() {
        Firmware f = fw;
        return f == null || f.pageFaults.settled();
    }

    /** 64-byte units of the firmware's pages holding object contexts now (tests). */
    int firmwareContextUnits() {
        Firmware f = fw;
        return f == null ? 0 : f.pages.usedUnits();
    }

    /** Pages the firmware holds now (every one is a DMA mapping the driver must take back). */
    public int pagesHeld() {
        Firmware f = fw;
        return f == null ? 0 : f.pages.held();
    }

    /**
     * The DevX state the firmware holds (tools, tests): user contexts, umems, general objects and
     * CQs live; {@code null} before power-on.
     */
    public String devxDescribe() {
        Firmware f = fw;
        return f == null ? null : String.format("user contexts %d, umems %d, general objects %d, CQs %d", f.uctxs.live(), f.umems.count(),
                f.generalObjects.count(), f.transport.cqCount());
    }

    /** User contexts, umems and general objects live (0 before power-on). */
    public int devxLive() {
        Firmware f = fw;
        return f == null ? 0 : f.uctxs.live() + f.umems.count() + f.generalObjects.count();
    }

    /** The reason of the last refused command (a log line the firmware would keep). */
    public String lastRefusal() {
        Firmware f = fw;
        return f == null ? "" : f.lastRefusal();
    }

    /** Commands executed and entries refused at delivery (for tools and tests). */
    public long commandsExecuted() {
        return cmdq == null ? 0 : cmdq.executed.get();
    }

    public long deliveryErrors() {
        return cmdq == null ? 0 : cmdq.deliveryErrors.get();
    }

    /** Powers the firmware down (the function's removal or the model's stop). Idempotent. */
    @Override
    public void close() {
        closed = true;
        Firmware f = fw;
        if (f != null && f.dpa != null) {
            f.dpa.drop(); // every EU stops before the port, queues and keys go
        }
        org.peerdirect.hca.engine.HcaDevice eng = engine;
        if (eng != null) {
            eng.remove(); // the port leaves the fabric, QPs flush, keys are revoked
        }
        Thread t = firmware;
        boolean interrupted = t != null && org.peerdirect.hca.engine.FirmwareThreads.kthreadStop(t, java.time.Duration.ofSeconds(5));
        if (f != null && f.dpa != null) {
            f.dpa.drop(); // what a DPA command running during the first drop made (idempotent)
        }
        if (interrupted) {
            Thread.currentThread().interrupt(); // handed back once the close is done, not before
        }
    }
}
