package org.peerdirect.mlx5.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.peerdirect.hca.cx4.ifc.IfcField;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One ConnectX-4+ function driven by {@code mlx5_core} ({@code main.c}): bring-up in the Linux
 * order and teardown in the reverse order; the auxiliary device's interface mlx5_ib uses. The
 * device is reached only through its function: MMIO on BAR0, DMA pages mapped through its IOMMU
 * domain, MSI-X. The rest of {@code mlx5_core} sits beside it as in the kernel: the capabilities
 * and their commands in {@link Mlx5Fw} ({@code fw.c}), the health poll and the fatal error state
 * in {@link Mlx5Health} ({@code health.c}), the EQEs' dispatch to their listeners in
 * {@link Mlx5Events} ({@code events.c}), the EQ table and its interrupts in {@link Mlx5EqTable}
 * and each EQ in {@link Mlx5Eq} ({@code eq.c}), the command interface in {@link CmdIf}
 * ({@code cmd.c}), the pages in {@link PageAlloc} ({@code pagealloc.c}).
 *
 * <p>Bring-up ({@code mlx5_function_setup} + {@code mlx5_load}): wait for the initializing bit,
 * check the command interface revision, hand over the command queue; {@code ENABLE_HCA}; start the
 * health poll; {@code QUERY_ISSI}/{@code SET_ISSI}; boot pages; {@code QUERY_HCA_CAP} and
 * {@code SET_HCA_CAP}; init pages; {@code INIT_HCA}; {@code SET_DRIVER_VERSION}; the capabilities
 * again; {@code ALLOC_UAR}; the command EQ (commands complete by events from then on), the async
 * EQ and the page-request EQ. Not done (not modelled by the device): the DTOR and
 * HOST_ENDIANNESS registers ({@code ACCESS_REG}).
 *
 * <p>Teardown ({@code mlx5_unload} + {@code mlx5_function_teardown}): the page-request and async
 * EQs, back to polling, the command EQ; {@code DEALLOC_UAR}; {@code TEARDOWN_HCA} (force close if
 * the graceful one is refused); the page work stopped; every page reclaimed; the health poll
 * stopped; {@code DISABLE_HCA} last; every DMA page unmapped and freed. A device that is gone or
 * dead gets no command: its pages are reclaimed locally.
 *
 * <p>Lock rules: {@link #load} and {@link #unload} are called by the driver's bind/unbind thread,
 * never concurrently ({@code synchronized}), and take the EQ table's monitor after this one;
 * the interrupt threads take neither ({@link Mlx5EqTable}); the health thread only reads
 * registers and sets the verdict ({@link Mlx5Health}).
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/net/ethernet/mellanox/mlx5/core/main.c">main.c</a>
 */
public final class Mlx5CoreDev {

    /** Timing a user may tune (Configuration Admin in the driver). */
    public record Settings(long cmdTimeoutMillis, long healthPollMillis, long reclaimTimeoutMillis) {
        /** Linux polls health every 2 s and gives up reclaiming after a few seconds without progress. */
        public static final Settings DEFAULT = new Settings(10_000, 2_000, 5_000);
    }

    /** The driver version string {@code SET_DRIVER_VERSION} sends. */
    static final String DRIVER_VERSION = "peerdirect,mlx5_core,0.1.0";
    /** What a QP's or SRQ's owner gets from the async EQ ({@code mlx5_core_qp.event}, {@code mlx5_core_srq.event}): the EQE type. */
    @FunctionalInterface
    public interface ResourceEvents {
        void event(int type);
    }

    /** What mlx5_ib gets of port changes ({@code mlx5_notifier_register}'s {@code MLX5_EVENT_TYPE_PORT_CHANGE}). */
    @FunctionalInterface
    public interface PortEvents {
        void portChange(int port, int subtype);
    }

    /** Sets (null: clears) the listener of port changes. */
    public void setPortEvents(PortEvents h) {
        events.setPortEvents(h);
    }

    /** DevX's listener of general objects' changes ({@code devx_event_notifier}). */
    public interface ObjectEvents {
        void objectChange(int objType, int objId);
    }

    /** Sets (or with null, takes back) the listener of {@code OBJECT_CHANGE} EQEs. */
    public void setObjectEvents(ObjectEvents h) {
        events.setObjectEvents(h);
    }

    /** What a CQ's owner gets from the EQs ({@code mlx5_core_cq.comp} and {@code .event}). */
    public interface CqEvents {
        void completion();

        void error();
    }

    private final String name;
    private final PciFunction fn;
    /** Changed in place by {@link #settings(Settings)}; each use reads it once. */
    private volatile Settings settings;
    private final DmaCoherentPages dma;
    private final CmdIf cmd;
    private final PageAlloc pages;
    private final List<String> teardownProblems = new CopyOnWriteArrayList<>();
    private final Mlx5Fw fw;
    private final Mlx5Health health;
    private final Mlx5Events events;
    private final Mlx5EqTable eqTable;
    /** Set at the end of {@link #unload}: a command after it fails at once (DEVICE_GONE) instead of waiting for a queue nobody serves. */
    private volatile boolean unloaded;
    // bring-up state: the load/unload thread's (synchronized)
    private boolean enabled;
    private boolean initialized;
    private int uar = -1;
    private volatile boolean up;
    private final Mm mm;
    private int issi;

    public Mlx5CoreDev(String name, PciFunction fn, Mm mm, Settings settings) {
        this.name = name;
        this.fn = fn;
        this.settings = settings;
        this.mm = mm;
        this.dma = new DmaCoherentPages(mm, fn.dma());
        this.cmd = new CmdIf(name, fn, dma, TimeUnit.MILLISECONDS.toNanos(settings.cmdTimeoutMillis()), this::unusable);
        this.pages = new PageAlloc(name, cmd, dma);
        this.fw = new Mlx5Fw(cmd);
        this.health = new Mlx5Health(name, fn, cmd, () -> this.settings.healthPollMillis());
        this.events = new Mlx5Events(cmd, pages);
        this.eqTable = new Mlx5EqTable(name, cmd, dma, fn, events, this::step);
    }

    public String name() {
        return name;
    }

    public PciFunction function() {
        return fn;
    }

    private String unusable() {
        if (unloaded) {
            return "the driver unloaded the device";
        }
        String d = health.deadReason();
        if (d != null) {
            return "the device is dead: " + d;
        }
        return fn.present() ? null : "the function is gone";
    }

    private boolean alive() {
        return unusable() == null;
    }

    /** Brings the function up; on failure everything done so far is undone and the cause thrown. */
    public synchronized void load() {
        unloaded = false;
        fw.reset();
        try {
            functionSetup();
            loadEqs();
            up = true;
        } catch (RuntimeException e) {
            unload();
            throw e;
        }
    }

    /**
     * {@code mlx5_function_setup} and {@code mlx5_init_once}'s firmware part: the command
     * interface, {@code ENABLE_HCA}, the health poll, the ISSI, boot pages, the capabilities
     * ({@link Mlx5Fw}), init pages, {@code INIT_HCA}, the driver version, the capabilities again.
     */
    private void functionSetup() {
        cmd.enable();
        exec(Mlx5Cmd.ENABLE_HCA, 0);
        enabled = true;
        health.start();
        setIssi();
        pages.satisfyStartupPages(true);
        fw.handleHcaCap();
        fw.handleHcaCapOdp();
        pages.satisfyStartupPages(false);
        fw.initHca();
        initialized = true;
        if (HcaCap.DRIVER_VERSION.get(fw.caps(), 0) != 0) {
            setDriverVersion();
        }
        fw.queryHcaCaps();
    }

    /** {@code mlx5_set_driver_version}: {@link #DRIVER_VERSION} in ASCII. */
    private void setDriverVersion() {
        MemorySegment in = header(Mlx5Cmd.SET_DRIVER_VERSION, 0, Pages.SET_DRIVER_VERSION_IN_LEN);
        byte[] v = DRIVER_VERSION.getBytes(StandardCharsets.US_ASCII);
        MemorySegment.copy(v, 0, in, ValueLayout.JAVA_BYTE, Pages.DRIVER_VERSION_IN, v.length);
        cmd.exec(in, 16);
    }

    /** {@code mlx5_load}'s EQ part: the UAR, then the EQ table ({@link Mlx5EqTable#create}). */
    private void loadEqs() {
        uar = Pages.INDEX24.get(exec(Mlx5Cmd.ALLOC_UAR, 0), 0);
        eqTable.create(uar, HcaCap.PAGE_REQUEST_DISABLE.get(fw.caps(), 0) == 0);
    }

    private static MemorySegment header(int opcode, int opMod, int len) {
        return CmdIf.input(opcode, opMod, len);
    }

    private MemorySegment exec(int opcode, int opMod) {
        return cmd.exec(header(opcode, opMod, 16), 16);
    }

    /** {@code mlx5_core_set_issi}: ISSI 1 when the firmware supports it, else 0; a refused QUERY_ISSI means 0. */
    private void setIssi() {
        MemorySegment out;
        try {
            out = cmd.exec(header(Mlx5Cmd.QUERY_ISSI, 0, 16), Mlx5Cmd.QUERY_ISSI_OUT_LEN);
        } catch (Mlx5CmdException e) {
            if (e.kind() == Mlx5CmdException.Kind.STATUS) {
                issi = 0;
                return;
            }
            throw e;
        }
        int supported = out.get(BE32, Mlx5Cmd.QUERY_ISSI_OUT_SUPPORTED);
        if ((supported & 1 << 1) != 0) {
            MemorySegment in = header(Mlx5Cmd.SET_ISSI, 0, 16);
            in.set(BE32, 8, 1);
            cmd.exec(in, 16);
            issi = 1;
        } else if ((supported & 1) != 0 || supported == 0) {
            issi = 0;
        } else {
            throw new IllegalStateException(String.format("%s: firmware supports neither ISSI 0 nor 1 (0x%x)", name, supported));
        }
    }

    /** {@code MLX5_CAP_ODP}: a field of the ODP block (0 on a device without page faults). */
    public int odpCap(IfcField f) {
        return fw.odpCap(f);
    }

    // ------------------------------------------------------------------ health (Mlx5Health)

    /**
     * New timing from Configuration Admin, applied in place (the device stays bound and up):
     * commands started from now on wait the new timeout, the health poll restarts at the new
     * interval (the pending poll is cancelled and a new chain scheduled), a teardown gives up
     * reclaiming pages after the new timeout.
     */
    public synchronized void settings(Settings s) {
        settings = s;
        cmd.timeout(TimeUnit.MILLISECONDS.toNanos(s.cmdTimeoutMillis()));
        health.restart();
    }

    /** Runs {@code r} (on the health thread) when the device is found dead: the {@code MLX5_DEV_EVENT_SYS_ERROR} of mlx5_ib. */
    public void addDeadListener(Runnable r) {
        health.addDeadListener(r);
    }

    public void removeDeadListener(Runnable r) {
        health.removeDeadListener(r);
    }

    /** Waits until the health poll (or a removal) has declared the device dead, at most {@code millis}; true when it is dead. */
    public boolean awaitDead(long millis) throws InterruptedException {
        return health.awaitDead(millis);
    }

    // ------------------------------------------------------------------ the auxiliary device's interface (mlx5_ib)

    /**
     * Runs one command ({@code mlx5_cmd_exec}): {@code in} built with {@link #input}, the output of
     * {@code outLen} bytes returned. Refusals, timeouts and a gone device are {@link Mlx5CmdException}s.
     */
    public MemorySegment exec(MemorySegment in, int outLen) {
        return cmd.exec(in, outLen);
    }

    /** A command input of {@code len} bytes with its header. */
    public static MemorySegment input(int opcode, int opMod, int len) {
        return CmdIf.input(opcode, opMod, len);
    }

    /** The completion EQ's number (the {@code c_eqn} of CQs). */
    public int compEqn() {
        return eqTable.compEqn();
    }

    /** {@code mlx5_core_create_cq}'s table part: EQEs naming {@code cqn} go to {@code h}. */
    public void registerCq(int cqn, CqEvents h) {
        events.registerCq(cqn, h);
    }

    public void unregisterCq(int cqn) {
        events.unregisterCq(cqn);
    }

    /** {@code mlx5_core_create_qp}'s resource-table part: affiliated events naming {@code qpn} go to {@code h}. */
    public void registerQp(int qpn, ResourceEvents h) {
        events.registerQp(qpn, h);
    }

    public void unregisterQp(int qpn) {
        events.unregisterQp(qpn);
    }

    /** {@code mlx5_core_create_srq}'s table part: SRQ events naming {@code srqn} go to {@code h}. */
    public void registerSrq(int srqn, ResourceEvents h) {
        events.registerSrq(srqn, h);
    }

    public void unregisterSrq(int srqn) {
        events.unregisterSrq(srqn);
    }

    public Mm mm() {
        return mm;
    }

    /**
     * A zeroed DMA-coherent 4 KiB page for the device ({@code dma_alloc_coherent}), for the IB
     * driver's own queues (the UMR QP); freed by {@link #freeCoherent}, or at the latest by unload.
     */
    public DmaPage allocCoherent() {
        DmaCoherentPages.Page p = dma.alloc();
        return new DmaPage(p.iova(), p.mem(), p);
    }

    public void freeCoherent(DmaPage p) {
        dma.free((DmaCoherentPages.Page) p.handle());
    }

    /** One coherent page: its bus address and the kernel's view of its bytes. */
    public record DmaPage(long iova, MemorySegment mem, Object handle) {
    }

    /** The UAR page the core allocated at bring-up ({@code mdev->priv.uar}), for the driver's own QPs' doorbells. */
    public synchronized int uarIndex() {
        if (uar < 0) {
            throw new IllegalStateException(name + ": not up");
        }
        return uar;
    }

    // ------------------------------------------------------------------ teardown

    /** Tears down whatever {@link #load} brought up, in the reverse order. Idempotent; never throws. */
    public synchronized void unload() {
        up = false;
        teardownProblems.clear();
        eqTable.destroy();
        if (uar >= 0) {
            step("DEALLOC_UAR", () -> {
                MemorySegment in = header(Mlx5Cmd.DEALLOC_UAR, 0, 16);
                Pages.INDEX24.set(in, 0, uar);
                cmd.exec(in, 16);
            });
            uar = -1;
        }
        if (initialized) {
            step("TEARDOWN_HCA", fw::teardownHca);
            initialized = false;
        }
        pages.stop(TimeUnit.MILLISECONDS.toNanos(settings.cmdTimeoutMillis() + 1_000)); // the running page command ends within its timeout
        pages.reclaimAll(TimeUnit.MILLISECONDS.toNanos(settings.reclaimTimeoutMillis()), alive());
        health.stop();
        if (enabled) {
            step("DISABLE_HCA", () -> exec(Mlx5Cmd.DISABLE_HCA, 0));
            enabled = false;
        }
        unloaded = true;
        cmd.drain(); // a command of another thread still waiting gives up before its queue page goes
        dma.freeAll();
        if (!teardownProblems.isEmpty()) {
            System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING, name + ": teardown: " + teardownProblems);
        }
    }

    /** Creates one more control-vector EQ (for completion EQs to come, and tests). */
    Mlx5Eq createEq(String kind, int nent, long mask) {
        return eqTable.addEq(kind, nent, mask, Mlx5EqTable.CTRL_VECTOR, null);
    }

    /** What a generic EQ's owner gets: each EQE's type, subtype and 28 data bytes (valid during the call), on the EQ's interrupt thread. */
    @FunctionalInterface
    public interface EqeHandler {
        void eqe(int type, int subType, MemorySegment data);
    }

    /** An EQ another driver created on this function ({@code struct mlx5_eq} of {@code mlx5_eq_create_generic}). */
    public final class GenericEq {
        private final Mlx5Eq eq;

        private GenericEq(Mlx5Eq eq) {
            this.eq = eq;
        }

        public int eqn() {
            return eq.eqn;
        }

        /** {@code mlx5_eq_destroy_generic}: no handler call starts after this returns (idempotent; quiet when the device is gone). */
        public void destroy() {
            eqTable.destroyGeneric(eq);
        }
    }

    /**
     * {@code mlx5_eq_create_generic}: an EQ of at least {@code nent} entries taking the events of
     * {@code mask}, on the control vector, its EQEs handed to {@code handler}; destroyed with the
     * function's other EQs at unload if its owner did not.
     */
    public GenericEq createGenericEq(String kind, int nent, long mask, EqeHandler handler) {
        if (!alive() || !up) {
            throw new KernelException(KernelException.Errno.EIO, name + ": cannot create an EQ: " + (alive() ? "the function is not up" : unusable()));
        }
        return new GenericEq(eqTable.addEq(kind, nent, mask, Mlx5EqTable.CTRL_VECTOR, handler));
    }

    /** Runs a command with a 24-bit index at byte 0x09 (the UAR, PD, ... commands) and a 16-byte output. */
    MemorySegment execIndexed(int opcode, int opMod, int index) {
        MemorySegment in = header(opcode, opMod, 16);
        Pages.INDEX24.set(in, 0, index);
        return cmd.exec(in, 16);
    }

    void destroyEq(Mlx5Eq eq) {
        eqTable.destroyEq(eq);
    }

    /** One teardown step: skipped when the device cannot take commands, its failure recorded and the teardown going on. */
    private void step(String what, Runnable r) {
        if (!alive()) {
            return;
        }
        try {
            r.run();
        } catch (RuntimeException e) {
            teardownProblems.add(what + ": " + e.getMessage());
        }
    }

    // ------------------------------------------------------------------ views for tools and tests

    public boolean isUp() {
        return up && health.deadReason() == null && fn.present();
    }

    /** Why the device is dead, or null. */
    public String deadReason() {
        return health.deadReason();
    }

    /** Why {@link #isUp()} is false (a verdict, or what the health poll has not noticed yet), or null when it is up. */
    public String whyDown() {
        String d = health.deadReason();
        return d != null ? d : !fn.present() ? "the PCI function is gone" : !up ? "not loaded" : null;
    }

    public CmdLog cmdLog() {
        return cmd.log();
    }

    public int issi() {
        return issi;
    }

    /** A general capability (current value) by its field. */
    public int cap(IfcField f) {
        return fw.cap(f);
    }

    public boolean eventMode() {
        return cmd.eventsMode();
    }

    /**
     * {@code mlx5_cmd_use_polling}: commands complete by polling the entry's ownership bit, as
     * during bring-up and before the command EQ goes. A command in flight is unaffected: every
     * waiter checks the ownership bit in either mode.
     */
    public void cmdUsePolling() {
        cmd.useEvents(false);
    }

    /** {@code mlx5_cmd_use_events}: completion by the command EQ's events again; refused while the device has no command EQ. */
    public void cmdUseEvents() {
        if (!eqTable.hasCmdEq() || !isUp()) {
            throw new IllegalStateException(name + ": no command EQ (the device is " + (isUp() ? "coming up or going" : whyDown()) + ")");
        }
        cmd.useEvents(true);
    }

    /** Problems the last teardown met (each a step that failed; the teardown went on). */
    public List<String> teardownProblems() {
        return List.copyOf(teardownProblems);
    }

    /** {@code mlx5:pages}: given per kind, taken back, held now, requests. */
    public String pagesSummary() {
        return String.format("%s: held %d; given boot %d, init %d, regular %d; taken back %d; page requests %d, cant-give %d, reclaimed "
                + "locally %d; DMA pages live %d", name, pages.held(), pages.given(PageAlloc.Kind.BOOT), pages.given(PageAlloc.Kind.INIT),
                pages.given(PageAlloc.Kind.REGULAR), pages.taken(), pages.requests(), pages.cantGive(), pages.reclaimedLocally(), dma.live());
    }

    public int pagesHeld() {
        return pages.held();
    }

    /** The page allocator (tests of this package: the firmware's page request, its stop). */
    PageAlloc pages() {
        return pages;
    }

    /** Commands in flight on the command interface (tests of this package). */
    int commandsInFlight() {
        return cmd.inFlight();
    }

    long pagesGiven(PageAlloc.Kind kind) {
        return pages.given(kind);
    }

    public long pageRequests() {
        return pages.requests();
    }

    public int dmaPagesLive() {
        return dma.live();
    }

    /** {@code mlx5:eqs}: one line per EQ. */
    public List<String> eqsSummary() {
        return eqTable.summary();
    }

    /** {@code mlx5:health}. */
    public String healthSummary() {
        return health.summary(up);
    }
}
