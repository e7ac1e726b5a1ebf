package org.peerdirect.mlx5.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.mlx5.core.Mlx5CoreDev.EqeHandler;

/**
 * One function's EQs ({@code struct mlx5_eq_table} of {@code eq.c}): the command, async and
 * page-request EQs on the control vector ({@code create_async_eqs}), the completion EQ on its own
 * vector ({@code create_comp_eqs}), the generic EQs other drivers create
 * ({@code mlx5_eq_create_generic}: mlx5_ib's page-fault EQ), and the interrupt handlers that poll
 * them ({@code mlx5_eq_async_int}, {@code mlx5_eq_comp_int}), handing each EQE to
 * {@link Mlx5Events} or to the generic EQ's owner.
 *
 * <p>Lock rules: {@code this} guards the bring-up state and {@link #retired}; the core takes it
 * after its own monitor, never the other way. The interrupt threads take neither: they read
 * {@link #eqs} (copy on write) and {@link #genericHandlers} (guarded by itself). An EQ's ring is
 * freed only after its interrupt is ({@link #destroy}): a running poll may still read it.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/net/ethernet/mellanox/mlx5/core/eq.c">eq.c</a>
 */
final class Mlx5EqTable {

    /** One teardown step: the core's ({@code what} names it in the problems; skipped on a device that takes no command). */
    @FunctionalInterface
    interface Step {
        void run(String what, Runnable r);
    }

    /** Entries asked for each EQ ({@code MLX5_NUM_CMD_EQE}; the async EQ is smaller than Linux's 0x1000 here). */
    static final int CMD_EQ_NENT = 32;
    static final int ASYNC_EQ_NENT = 128;
    static final int PAGES_EQ_NENT = 1;
    /** The control EQs share vector 0, as Linux's control IRQ does. */
    static final int CTRL_VECTOR = 0;
    /** The completion EQ's vector ({@code mlx5_comp_eqs}: Linux creates one per CPU; the model's driver one). */
    static final int COMP_VECTOR = 1;
    static final int COMP_EQ_NENT = 1024;

    private final String name;
    private final CmdIf cmd;
    private final DmaCoherentPages dma;
    private final PciFunction fn;
    private final Mlx5Events events;
    private final Step step;
    private final List<Mlx5Eq> eqs = new CopyOnWriteArrayList<>();
    /** EQs destroyed (or being destroyed) whose rings wait for the interrupt to be freed. */
    private final List<Mlx5Eq> retired = new ArrayList<>();
    /** Handlers of the generic EQs; the interrupt thread looks them up (guarded by itself). */
    private final Map<Mlx5Eq, EqeHandler> genericHandlers = new IdentityHashMap<>();
    // bring-up state (this)
    private int uar = -1;
    private boolean irq;
    private boolean compIrq;
    private Mlx5Eq cmdEq;
    private Mlx5Eq asyncEq;
    private Mlx5Eq pagesEq;
    /** Read by the completion interrupt thread. */
    private volatile Mlx5Eq compEq;

    Mlx5EqTable(String name, CmdIf cmd, DmaCoherentPages dma, PciFunction fn, Mlx5Events events, Step step) {
        this.name = name;
        this.cmd = cmd;
        this.dma = dma;
        this.fn = fn;
        this.events = events;
        this.step = step;
    }

    /**
     * {@code mlx5_eq_table_create} on the UAR {@code uar}: the control interrupt, the command EQ
     * (commands complete by events from then on), the async EQ ({@link Mlx5Events#ASYNC_EVENTS}),
     * the page-request EQ unless {@code pageRequests} is false, then the completion interrupt and
     * EQ. A failure leaves what was made for {@link #destroy}.
     */
    synchronized void create(int uar, boolean pageRequests) {
        this.uar = uar;
        fn.requestIrq(CTRL_VECTOR, v -> pollEqs());
        irq = true;
        cmdEq = addEq("cmd", CMD_EQ_NENT, 1L << Eq.EVENT_CMD, CTRL_VECTOR, null);
        cmd.useEvents(true);
        asyncEq = addEq("async", ASYNC_EQ_NENT, Mlx5Events.ASYNC_EVENTS, CTRL_VECTOR, null);
        if (pageRequests) {
            pagesEq = addEq("pages", PAGES_EQ_NENT, 1L << Eq.EVENT_PAGE_REQUEST, CTRL_VECTOR, null);
        }
        fn.requestIrq(COMP_VECTOR, v -> pollComp());
        compIrq = true;
        compEq = addEq("comp0", COMP_EQ_NENT, 1L << Eq.EVENT_COMP, COMP_VECTOR, null);
    }

    /** Creates, publishes and arms an EQ; a generic EQ's handler is in place before an interrupt can find the EQ. */
    synchronized Mlx5Eq addEq(String kind, int nent, long mask, int vector, EqeHandler handler) {
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

    /** {@code destroy_unmap_eq}: unpublished, {@code DESTROY_EQ} as a teardown step, the ring kept until the interrupt is freed. */
    synchronized void destroyEq(Mlx5Eq eq) {
        eqs.remove(eq);
        retired.add(eq); // its ring is freed after the interrupt is: a running poll may still read it
        step.run("DESTROY_EQ " + eq.kind, () -> eq.destroy(cmd));
    }

    /** {@code mlx5_eq_destroy_generic}: no handler call starts after this returns (idempotent; quiet when the device is gone). */
    void destroyGeneric(Mlx5Eq eq) {
        if (eqs.contains(eq)) {
            destroyEq(eq);
        }
        synchronized (genericHandlers) {
            genericHandlers.remove(eq);
        }
    }

    /**
     * {@code mlx5_eq_table_destroy} and {@code destroy_async_eqs}: the completion EQ and its
     * interrupt, the generic EQs their owners left, the page-request and async EQs, the event
     * tables; back to polling, then the command EQ and the control interrupt; the rings last.
     * Idempotent.
     */
    synchronized void destroy() {
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
        events.clearTables();
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
                    eq.poll(events::eqe);
                }
            }
        }
    }

    /** The completion vector's handler ({@code mlx5_eq_comp_int}): each EQE names a CQ. */
    private void pollComp() {
        Mlx5Eq eq = compEq;
        if (eq != null) {
            eq.poll(events::comp);
        }
    }

    /** The completion EQ's number (the {@code c_eqn} of CQs). */
    int compEqn() {
        Mlx5Eq e = compEq;
        if (e == null) {
            throw new IllegalStateException(name + ": not up");
        }
        return e.eqn;
    }

    /** Whether the command EQ exists (commands may complete by events). */
    synchronized boolean hasCmdEq() {
        return cmdEq != null;
    }

    /** {@code mlx5:eqs}: one line per EQ. */
    List<String> summary() {
        List<String> out = new ArrayList<>();
        for (Mlx5Eq eq : eqs) {
            out.add(String.format("%s: eq %d %-5s entries %d, vector %d, ci %d, events %d (cmd %d, page requests %d, async %d)", name, eq.eqn,
                    eq.kind, eq.entries(), eq.vector, eq.consumerIndex(), eq.events(), eq.events(Eq.EVENT_CMD), eq.events(Eq.EVENT_PAGE_REQUEST),
                    eq.events() - eq.events(Eq.EVENT_CMD) - eq.events(Eq.EVENT_PAGE_REQUEST)));
        }
        return out;
    }
}
