package org.peerdirect.mlx5.core;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.IfcField;
import org.peerdirect.hca.cx4.ifc.Odp;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.InitSeg;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One ConnectX-4+ function driven by {@code mlx5_core} ({@code main.c}): bring-up in the Linux
 * order, the EQ table, the health poll, and teardown in the reverse order. The device is reached
 * only through its function: MMIO on BAR0, DMA pages mapped through its IOMMU domain, MSI-X.
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
 * never concurrently ({@code synchronized}); the interrupt thread reads the EQ list (copy on
 * write); the health thread only reads registers and sets {@link #dead}.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/net/ethernet/mellanox/mlx5/core/main.c">main.c</a>
 */
public final class Mlx5CoreDev {

    /** Timing a user may tune (Configuration Admin in the driver). */
    public record Settings(long cmdTimeoutMillis, long healthPollMillis, long reclaimTimeoutMillis) {
        /** Linux polls health every 2 s and gives up reclaiming after a few seconds without progress. */
        public static final Settings DEFAULT = new Settings(10_000, 2_000, 5_000);
    }

    /** {@code MAX_MISSES}: health polls with a stuck counter before the device is declared dead. */
    static final int MAX_MISSES = 3;
    /** The driver version string {@code SET_DRIVER_VERSION} sends. */
    static final String DRIVER_VERSION = "peerdirect,mlx5_core,0.1.0";
    /** Entries asked for each EQ ({@code MLX5_NUM_CMD_EQE}; the async EQ is smaller than Linux's 0x1000 here). */
    static final int CMD_EQ_NENT = 32;
    static final int ASYNC_EQ_NENT = 128;
    static final int PAGES_EQ_NENT = 1;
    /** The control EQs share vector 0, as Linux's control IRQ does. */
    static final int CTRL_VECTOR = 0;
    /** The completion EQ's vector ({@code mlx5_comp_eqs}: Linux creates one per CPU; the model's driver one). */
    static final int COMP_VECTOR = 1;
    static final int COMP_EQ_NENT = 1024;

    /** The affiliated events of QPs and SRQs the async EQ asks for ({@code MLX5_EVENT_TYPE_*} of {@code mlx5_eq_table}'s resource notifier). */
    static final long QP_SRQ_EVENTS = 1L << Eq.EVENT_PATH_MIG | 1L << Eq.EVENT_COMM_EST | 1L << Eq.EVENT_SQ_DRAINED
            | 1L << Eq.EVENT_WQ_CATAS_ERROR | 1L << Eq.EVENT_PATH_MIG_FAILED | 1L << Eq.EVENT_WQ_INVAL_REQ_ERROR
            | 1L << Eq.EVENT_WQ_ACCESS_ERROR | 1L << Eq.EVENT_SRQ_CATAS_ERROR | 1L << Eq.EVENT_SRQ_LAST_WQE | 1L << Eq.EVENT_SRQ_RQ_LIMIT;

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

    private volatile PortEvents portEvents;

    /** Sets (null: clears) the listener of port changes. */
    public void setPortEvents(PortEvents h) {
        portEvents = h;
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
    private final DmaPages dma;
    private final CmdIf cmd;
    private final PageAlloc pages;
    private final List<Mlx5Eq> eqs = new CopyOnWriteArrayList<>();
    /** EQs destroyed (or being destroyed) whose rings wait for the interrupt to be freed. */
    private final List<Mlx5Eq> retired = new ArrayList<>();
    private final AtomicLongArray asyncEvents = new AtomicLongArray(64);
    private final List<String> teardownProblems = new CopyOnWriteArrayList<>();
    /** Why the device is dead (health poll, removal), or null. */
    private volatile String dead;
    /** Set at the end of {@link #unload}: a command after it fails at once (DEVICE_GONE) instead of waiting for a queue nobody serves. */
    private volatile boolean unloaded;
    private ScheduledExecutorService health;
    private int lastCounter = -1;
    /** Written by the health thread; volatile for {@link #healthSummary}. */
    private volatile int misses;
    // bring-up state: the load/unload thread's (synchronized)
    private boolean enabled;
    private boolean initialized;
    private boolean irq;
    private int uar = -1;
    private volatile boolean up;
    private Mlx5Eq cmdEq;
    private Mlx5Eq asyncEq;
    private Mlx5Eq pagesEq;
    private Mlx5Eq compEq;
    private boolean compIrq;
    /** cqn → its owner's handlers ({@code mlx5_cq_table}); read by the EQ threads. */
    private final java.util.concurrent.ConcurrentHashMap<Integer, CqEvents> cqTable = new java.util.concurrent.ConcurrentHashMap<>();
    private final java.util.concurrent.ConcurrentHashMap<Integer, ResourceEvents> qpEvents = new java.util.concurrent.ConcurrentHashMap<>();
    private final java.util.concurrent.ConcurrentHashMap<Integer, ResourceEvents> srqEvents = new java.util.concurrent.ConcurrentHashMap<>();
    private final List<Runnable> deadListeners = new CopyOnWriteArrayList<>();
    private final org.peerdirect.kernel.mm.Mm mm;
    private final byte[] capsCur = new byte[HcaCap.SIZE];
    private final byte[] capsMax = new byte[HcaCap.SIZE];
    /** The ODP capability block as set ({@code MLX5_CAP_ODP}); all zero without {@code pg}. */
    private final byte[] capsOdp = new byte[HcaCap.SIZE];
    private int issi;

    public Mlx5CoreDev(String name, PciFunction fn, Mm mm, Settings settings) {
        this.name = name;
        this.fn = fn;
        this.settings = settings;
        this.mm = mm;
        this.dma = new DmaPages(mm, fn.dma());
        this.cmd = new CmdIf(name, fn, dma, TimeUnit.MILLISECONDS.toNanos(settings.cmdTimeoutMillis()), this::unusable);
        this.pages = new PageAlloc(name, cmd, dma);
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
        String d = dead;
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
        java.util.Arrays.fill(capsOdp, (byte) 0);
        try {
            cmd.enable();
            exec(Mlx5Cmd.ENABLE_HCA, 0);
            enabled = true;
            startHealth();
            setIssi();
            pages.satisfyStartupPages(true);
            setHcaCaps();
            handleHcaCapOdp();
            pages.satisfyStartupPages(false);
            exec(Mlx5Cmd.INIT_HCA, 0);
            initialized = true;
            if (HcaCap.DRIVER_VERSION.get(caps(), 0) != 0) {
                MemorySegment in = header(Mlx5Cmd.SET_DRIVER_VERSION, 0, Pages.SET_DRIVER_VERSION_IN_LEN);
                byte[] v = DRIVER_VERSION.getBytes(StandardCharsets.US_ASCII);
                MemorySegment.copy(v, 0, in, ValueLayout.JAVA_BYTE, Pages.DRIVER_VERSION_IN, v.length);
                cmd.exec(in, 16);
            }
            queryCaps(HcaCap.MODE_MAX, capsMax);
            queryCaps(HcaCap.MODE_CUR, capsCur);
            uar = Pages.INDEX24.get(exec(Mlx5Cmd.ALLOC_UAR, 0), 0);
            fn.requestIrq(CTRL_VECTOR, v -> pollEqs());
            irq = true;
            cmdEq = addEq("cmd", CMD_EQ_NENT, 1L << Eq.EVENT_CMD);
            cmd.useEvents(true);
            // gather_async_events_mask's affiliated events of QPs and SRQs, the CQ error, port and internal errors
            asyncEq = addEq("async", ASYNC_EQ_NENT, 1L << Eq.EVENT_CQ_ERROR | 1L << Eq.EVENT_INTERNAL_ERROR | 1L << Eq.EVENT_PORT_CHANGE
                    | QP_SRQ_EVENTS);
            if (HcaCap.PAGE_REQUEST_DISABLE.get(caps(), 0) == 0) {
                pagesEq = addEq("pages", PAGES_EQ_NENT, 1L << Eq.EVENT_PAGE_REQUEST);
            }
            fn.requestIrq(COMP_VECTOR, v -> pollComp());
            compIrq = true;
            compEq = addEq("comp0", COMP_EQ_NENT, 1L << Eq.EVENT_COMP, COMP_VECTOR);
            up = true;
        } catch (RuntimeException e) {
            unload();
            throw e;
        }
    }

    private synchronized Mlx5Eq addEq(String kind, int nent, long mask) {
        return addEq(kind, nent, mask, CTRL_VECTOR);
    }

    private synchronized Mlx5Eq addEq(String kind, int nent, long mask, int vector) {
        return addEq(kind, nent, mask, vector, null);
    }

    /** Creates, publishes and arms an EQ; a generic EQ's handler is in place before an interrupt can find the EQ. */
    private synchronized Mlx5Eq addEq(String kind, int nent, long mask, int vector, EqeHandler handler) {
        Mlx5Eq eq = Mlx5Eq.create(cmd, dma, fn, kind, nent, mask, uar, vector);
        if (handler != null) {
            synchronized (genericHandlers) {
                genericHandlers.put(eq, handler);
            }
        }
        eqs.add(eq); // before arming: an interrupt from now on finds it
        eq.arm();
        return eq;
    }

    private MemorySegment caps() {
        return MemorySegment.ofArray(capsCur);
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

    private void queryCaps(int mode, byte[] into) {
        queryCaps(HcaCap.TYPE_GENERAL, mode, into);
    }

    private void queryCaps(int type, int mode, byte[] into) {
        MemorySegment out = cmd.exec(header(Mlx5Cmd.QUERY_HCA_CAP, type << 1 | mode, 16), HcaCap.QUERY_OUT_LEN);
        MemorySegment.copy(out, HcaCap.OFFSET, MemorySegment.ofArray(into), 0, HcaCap.SIZE);
    }

    /**
     * {@code handle_hca_cap_odp}: with {@code pg}, the ODP block's SRQ-receive bits raised to their
     * maximum ({@code ODP_CAP_SET_MAX}) and set when that changes anything; the block as set is
     * what mlx5_ib reads ({@code MLX5_CAP_ODP}).
     */
    private void handleHcaCapOdp() {
        if (HcaCap.PG.get(caps(), 0) == 0) {
            return;
        }
        byte[] max = new byte[HcaCap.SIZE];
        queryCaps(HcaCap.TYPE_ODP, HcaCap.MODE_MAX, max);
        queryCaps(HcaCap.TYPE_ODP, HcaCap.MODE_CUR, capsOdp);
        MemorySegment cur = MemorySegment.ofArray(capsOdp);
        boolean change = false;
        for (IfcField f : new IfcField[] { Odp.RC_ODP_CAPS, Odp.UD_ODP_CAPS, Odp.XRC_ODP_CAPS, Odp.DC_ODP_CAPS }) {
            int want = f.get(cur, 0) | f.get(MemorySegment.ofArray(max), 0) & Odp.CAP_SRQ_RECEIVE;
            change |= want != f.get(cur, 0);
            f.set(cur, 0, want);
        }
        if (change) {
            MemorySegment in = header(Mlx5Cmd.SET_HCA_CAP, HcaCap.TYPE_ODP << 1, HcaCap.SET_IN_LEN);
            MemorySegment.copy(cur, 0, in, HcaCap.OFFSET, HcaCap.SIZE);
            cmd.exec(in, 16);
        }
    }

    /** {@code MLX5_CAP_ODP}: a field of the ODP block (0 on a device without page faults). */
    public int odpCap(IfcField f) {
        return f.get(MemorySegment.ofArray(capsOdp), 0);
    }

    /** {@code handle_hca_cap}: the current general caps edited as Linux edits them, then set. */
    private void setHcaCaps() {
        queryCaps(HcaCap.MODE_MAX, capsMax);
        queryCaps(HcaCap.MODE_CUR, capsCur);
        MemorySegment in = header(Mlx5Cmd.SET_HCA_CAP, HcaCap.TYPE_GENERAL << 1, HcaCap.SET_IN_LEN);
        MemorySegment.copy(MemorySegment.ofArray(capsCur), 0, in, HcaCap.OFFSET, HcaCap.SIZE);
        MemorySegment max = MemorySegment.ofArray(capsMax);
        HcaCap.PKEY_TABLE_SIZE.set(in, HcaCap.OFFSET, 0); // to_fw_pkey_sz(128)
        HcaCap.LOG_MAX_QP.set(in, HcaCap.OFFSET, Math.min(18, HcaCap.LOG_MAX_QP.get(max, 0))); // prof_sel 2's log_max_qp
        HcaCap.CMDIF_CHECKSUM.set(in, HcaCap.OFFSET, 0);
        HcaCap.DRAIN_SIGERR.set(in, HcaCap.OFFSET, HcaCap.DRAIN_SIGERR.get(max, 0));
        HcaCap.LOG_UAR_PAGE_SZ.set(in, HcaCap.OFFSET, 0); // PAGE_SHIFT - 12
        HcaCap.CACHE_LINE_128BYTE.set(in, HcaCap.OFFSET, 0); // 64-byte cache lines
        cmd.exec(in, 16);
    }

    /** The MSI-X handler of the control vector: every control EQ polled to the end. */
    private void pollEqs() {
        for (Mlx5Eq eq : eqs) {
            if (eq.vector == CTRL_VECTOR) {
                EqeHandler h;
                synchronized (genericHandlers) {
                    h = genericHandlers.get(eq);
                }
                if (h != null) {
                    eq.poll(h::eqe);
                } else {
                    eq.poll(this::eqe);
                }
            }
        }
    }

    /** The completion vector's handler ({@code mlx5_eq_comp_int}): each EQE names a CQ. */
    private void pollComp() {
        Mlx5Eq eq = compEq;
        if (eq != null) {
            eq.poll((type, sub, data) -> {
                CqEvents h = cqTable.get(data.get(BE32, 0x18) & 0xff_ffff);
                if (h != null) {
                    h.completion();
                }
            });
        }
    }

    private void eqe(int type, int subType, MemorySegment data) {
        if (type != Eq.EVENT_CMD && type != Eq.EVENT_PAGE_REQUEST) {
            asyncEvents.incrementAndGet(type & 63);
        }
        switch (type) {
            case Eq.EVENT_CMD -> cmd.complete(data.get(BE32, 0));
            case Eq.EVENT_PAGE_REQUEST -> pages.request(data.get(BE32, Eq.PAGE_REQ_NUM_PAGES - Eq.EQE_DATA));
            case Eq.EVENT_CQ_ERROR -> {
                CqEvents h = cqTable.get(data.get(BE32, 0) & 0xff_ffff);
                if (h != null) {
                    h.error();
                }
            }
            case Eq.EVENT_PORT_CHANGE -> {
                PortEvents h = portEvents;
                if (h != null) {
                    h.portChange((data.get(ValueLayout.JAVA_BYTE, Eq.PORT_CHANGE_PORT) >> 4) & 0xf, subType);
                }
            }
            default -> {
                if ((QP_SRQ_EVENTS & 1L << (type & 63)) != 0) {
                    // srq_event_notifier / rsc_event_notifier: the number in mlx5_eqe_qp_srq, the SRQ's events by type
                    boolean srq = type == Eq.EVENT_SRQ_RQ_LIMIT || type == Eq.EVENT_SRQ_CATAS_ERROR;
                    ResourceEvents h = (srq ? srqEvents : qpEvents).get(data.get(BE32, Srq.EQE_QP_SRQ_N) & 0xff_ffff);
                    if (h != null) {
                        h.event(type);
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------------ health

    private void startHealth() {
        lastCounter = -1;
        misses = 0;
        health = Executors.newSingleThreadScheduledExecutor(r -> Thread.ofPlatform().daemon().name(name + "-health").unstarted(r));
        long gen;
        synchronized (healthLock) {
            gen = ++healthGen;
        }
        scheduleHealth(health, gen);
    }

    /** Guards {@link #nextPoll} and {@link #healthGen}; taken after {@code this} (never the other way). */
    private final Object healthLock = new Object();
    private java.util.concurrent.ScheduledFuture<?> nextPoll;
    /** The poll chain that may go on: a chain of an older generation (a changed interval) ends. */
    private long healthGen;

    /** Schedules the next poll of chain {@code gen} after the interval set now, unless a newer chain replaced it. */
    private void scheduleHealth(ScheduledExecutorService h, long gen) {
        synchronized (healthLock) {
            if (gen != healthGen) {
                return;
            }
            try {
                nextPoll = h.schedule(() -> {
                    pollHealth();
                    scheduleHealth(h, gen);
                }, settings.healthPollMillis(), TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.RejectedExecutionException stopped) {
                // stopHealth shut the poller down
            }
        }
    }

    /**
     * New timing from Configuration Admin, applied in place (the device stays bound and up):
     * commands started from now on wait the new timeout, the health poll restarts at the new
     * interval (the pending poll is cancelled and a new chain scheduled), a teardown gives up
     * reclaiming pages after the new timeout.
     */
    public synchronized void settings(Settings s) {
        settings = s;
        cmd.timeout(TimeUnit.MILLISECONDS.toNanos(s.cmdTimeoutMillis()));
        ScheduledExecutorService h = health;
        if (h != null) {
            long gen;
            synchronized (healthLock) {
                gen = ++healthGen;
                if (nextPoll != null) {
                    nextPoll.cancel(false);
                }
            }
            scheduleHealth(h, gen);
        }
    }

    /** {@code poll_health}: a vanished function, a fatal syndrome or a counter stuck for {@link #MAX_MISSES} polls. */
    private void pollHealth() {
        if (dead != null) {
            return;
        }
        if (!fn.present()) {
            markDead("PCI channel offline (the function is gone)");
            return;
        }
        int synd = healthSyndrome();
        if (synd != 0) {
            markDead(String.format("firmware fatal error, health syndrome 0x%x", synd));
            return;
        }
        int counter = fn.read32be(0, InitSeg.HEALTH_COUNTER) & 0xff_ffff;
        if (counter == lastCounter) {
            if (++misses >= MAX_MISSES) {
                markDead("device's health compromised - reached miss count (health counter stuck at " + counter + ")");
            }
        } else {
            misses = 0;
        }
        lastCounter = counter;
    }

    /** {@code health.synd}: the byte at 0x23d, read as the 32-bit register it sits in (bits 23:16). */
    private int healthSyndrome() {
        return fn.read32be(0, InitSeg.HEALTH_SYND & ~3L) >>> 16 & 0xff;
    }

    private void markDead(String reason) {
        dead = reason;
        System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.ERROR, name + ": " + reason);
        cmd.complete(-1); // wake every waiter: each sees the device dead
        for (Runnable r : deadListeners) { // mlx5_ib's event: the IB device is unregistered (its users disassociated)
            try {
                r.run();
            } catch (RuntimeException e) {
                System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING, name + ": dead listener failed", e);
            }
        }
    }

    /** Runs {@code r} (on the health thread) when the device is found dead: the {@code MLX5_DEV_EVENT_SYS_ERROR} of mlx5_ib. */
    public void addDeadListener(Runnable r) {
        deadListeners.add(r);
    }

    public void removeDeadListener(Runnable r) {
        deadListeners.remove(r);
    }

    /**
     * Waits until the health poll (or a removal) has declared the device dead, at most
     * {@code millis}; true when it is dead. The listener is added before {@link #dead} is read,
     * and {@link #markDead} sets the field before it runs the listeners, so no verdict is missed.
     */
    public boolean awaitDead(long millis) throws InterruptedException {
        java.util.concurrent.CountDownLatch found = new java.util.concurrent.CountDownLatch(1);
        Runnable r = found::countDown;
        addDeadListener(r);
        try {
            return dead != null || found.await(millis, TimeUnit.MILLISECONDS);
        } finally {
            removeDeadListener(r);
        }
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
        Mlx5Eq e = compEq;
        if (e == null) {
            throw new IllegalStateException(name + ": not up");
        }
        return e.eqn;
    }

    /** {@code mlx5_core_create_cq}'s table part: EQEs naming {@code cqn} go to {@code h}. */
    public void registerCq(int cqn, CqEvents h) {
        cqTable.put(cqn, h);
    }

    public void unregisterCq(int cqn) {
        cqTable.remove(cqn);
    }

    /** {@code mlx5_core_create_qp}'s resource-table part: affiliated events naming {@code qpn} go to {@code h}. */
    public void registerQp(int qpn, ResourceEvents h) {
        qpEvents.put(qpn, h);
    }

    public void unregisterQp(int qpn) {
        qpEvents.remove(qpn);
    }

    /** {@code mlx5_core_create_srq}'s table part: SRQ events naming {@code srqn} go to {@code h}. */
    public void registerSrq(int srqn, ResourceEvents h) {
        srqEvents.put(srqn, h);
    }

    public void unregisterSrq(int srqn) {
        srqEvents.remove(srqn);
    }

    public org.peerdirect.kernel.mm.Mm mm() {
        return mm;
    }

    /**
     * A zeroed DMA-coherent 4 KiB page for the device ({@code dma_alloc_coherent}), for the IB
     * driver's own queues (the UMR QP); freed by {@link #freeCoherent}, or at the latest by unload.
     */
    public DmaPage allocCoherent() {
        DmaPages.Page p = dma.alloc();
        return new DmaPage(p.iova(), p.mem(), p);
    }

    public void freeCoherent(DmaPage p) {
        dma.free((DmaPages.Page) p.handle());
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

    private void stopHealth() {
        ScheduledExecutorService h = health;
        health = null;
        if (h != null) {
            h.shutdownNow();
            try {
                h.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    // ------------------------------------------------------------------ teardown

    /** Tears down whatever {@link #load} brought up, in the reverse order. Idempotent; never throws. */
    public synchronized void unload() {
        up = false;
        teardownProblems.clear();
        Mlx5Eq comp = compEq;
        compEq = null; // the completion handler finds none from now on
        if (comp != null) {
            destroyEq(comp);
        }
        if (compIrq) {
            fn.freeIrq(COMP_VECTOR);
            compIrq = false;
        }
        List<Mlx5Eq> generic;
        synchronized (genericHandlers) {
            generic = new ArrayList<>(genericHandlers.keySet());
            genericHandlers.clear();
        }
        for (Mlx5Eq eq : generic) { // an owner that did not destroy its EQ (mlx5_ib's page-fault EQ goes with mlx5_ib)
            if (eqs.contains(eq)) {
                destroyEq(eq);
            }
        }
        for (Mlx5Eq eq : new Mlx5Eq[] { pagesEq, asyncEq }) {
            if (eq != null) {
                destroyEq(eq);
            }
        }
        pagesEq = null;
        asyncEq = null;
        cqTable.clear();
        qpEvents.clear();
        srqEvents.clear();
        cmd.useEvents(false); // the command EQ goes last, its own DESTROY_EQ polled
        if (cmdEq != null) {
            destroyEq(cmdEq);
            cmdEq = null;
        }
        if (irq) {
            fn.freeIrq(CTRL_VECTOR); // waits for a running handler: no poll can touch a ring after this
            irq = false;
        }
        for (Mlx5Eq eq : retired) {
            eq.freeRing(dma);
        }
        retired.clear();
        if (uar >= 0) {
            step("DEALLOC_UAR", () -> {
                MemorySegment in = header(Mlx5Cmd.DEALLOC_UAR, 0, 16);
                Pages.INDEX24.set(in, 0, uar);
                cmd.exec(in, 16);
            });
            uar = -1;
        }
        if (initialized) {
            step("TEARDOWN_HCA", () -> {
                try {
                    teardownHca(Pages.TEARDOWN_GRACEFUL);
                } catch (Mlx5CmdException e) {
                    if (e.kind() != Mlx5CmdException.Kind.STATUS || HcaCap.FORCE_TEARDOWN.get(caps(), 0) == 0) {
                        throw e;
                    }
                    teardownHca(Pages.TEARDOWN_FORCE_CLOSE);
                }
            });
            initialized = false;
        }
        pages.stop();
        pages.reclaimAll(TimeUnit.MILLISECONDS.toNanos(settings.reclaimTimeoutMillis()), alive());
        stopHealth();
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

    private void teardownHca(int profile) {
        MemorySegment in = header(Mlx5Cmd.TEARDOWN_HCA, 0, 16);
        Pages.TEARDOWN_PROFILE.set(in, 0, profile);
        cmd.exec(in, 16);
    }

    /** Creates one more control-vector EQ (for completion EQs to come, and tests). */
    Mlx5Eq createEq(String kind, int nent, long mask) {
        return addEq(kind, nent, mask);
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
            if (eqs.contains(eq)) {
                destroyEq(eq);
            }
            synchronized (genericHandlers) {
                genericHandlers.remove(eq);
            }
        }
    }

    /** Handlers of the generic EQs; the interrupt thread looks them up (guarded by itself). */
    private final java.util.Map<Mlx5Eq, EqeHandler> genericHandlers = new java.util.IdentityHashMap<>();

    /**
     * {@code mlx5_eq_create_generic}: an EQ of at least {@code nent} entries taking the events of
     * {@code mask}, on the control vector, its EQEs handed to {@code handler}; destroyed with the
     * function's other EQs at unload if its owner did not.
     */
    public GenericEq createGenericEq(String kind, int nent, long mask, EqeHandler handler) {
        if (!alive() || !up) {
            throw new KernelException(KernelException.Errno.EIO, name + ": cannot create an EQ: " + (alive() ? "the function is not up" : unusable()));
        }
        return new GenericEq(addEq(kind, nent, mask, CTRL_VECTOR, handler));
    }

    /** Runs a command with a 24-bit index at byte 0x09 (the UAR, PD, ... commands) and a 16-byte output. */
    MemorySegment execIndexed(int opcode, int opMod, int index) {
        MemorySegment in = header(opcode, opMod, 16);
        Pages.INDEX24.set(in, 0, index);
        return cmd.exec(in, 16);
    }

    synchronized void destroyEq(Mlx5Eq eq) {
        eqs.remove(eq);
        retired.add(eq); // its ring is freed after the interrupt is: a running poll may still read it
        step("DESTROY_EQ " + eq.kind, () -> eq.destroy(cmd));
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
        return up && dead == null && fn.present();
    }

    /** Why the device is dead, or null. */
    public String deadReason() {
        return dead;
    }

    /** Why {@link #isUp()} is false (a verdict, or what the health poll has not noticed yet), or null when it is up. */
    public String whyDown() {
        String d = dead;
        return d != null ? d : !fn.present() ? "the PCI function is gone" : !up ? "not loaded" : null;
    }

    public CmdLog cmdLog() {
        return cmd.log();
    }

    public int issi() {
        return issi;
    }

    /** A general capability (current value) by its field. */
    public int cap(org.peerdirect.hca.cx4.ifc.IfcField f) {
        return f.get(caps(), 0);
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
        if (cmdEq == null || !isUp()) {
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
        List<String> out = new ArrayList<>();
        for (Mlx5Eq eq : eqs) {
            out.add(String.format("%s: eq %d %-5s entries %d, vector %d, ci %d, events %d (cmd %d, page requests %d, async %d)", name, eq.eqn,
                    eq.kind, eq.entries(), eq.vector, eq.consumerIndex(), eq.events(), eq.events(Eq.EVENT_CMD), eq.events(Eq.EVENT_PAGE_REQUEST),
                    eq.events() - eq.events(Eq.EVENT_CMD) - eq.events(Eq.EVENT_PAGE_REQUEST)));
        }
        return out;
    }

    /** {@code mlx5:health}. */
    public String healthSummary() {
        String d = dead;
        if (!fn.present()) {
            return name + ": function gone";
        }
        int counter = fn.read32be(0, InitSeg.HEALTH_COUNTER) & 0xff_ffff;
        int synd = healthSyndrome();
        return String.format("%s: %s; health counter %d, syndrome 0x%x, poll every %d ms, miss count %d/%d", name,
                d == null ? (up ? "healthy" : "down") : "DEAD (" + d + ")", counter, synd, settings.healthPollMillis(), misses, MAX_MISSES);
    }
}
