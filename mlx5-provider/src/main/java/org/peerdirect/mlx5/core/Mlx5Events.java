package org.peerdirect.mlx5.core;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.ConcurrentHashMap;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Srq;
import org.peerdirect.mlx5.core.Mlx5CoreDev.CqEvents;
import org.peerdirect.mlx5.core.Mlx5CoreDev.PortEvents;
import org.peerdirect.mlx5.core.Mlx5CoreDev.ResourceEvents;

/**
 * Where one function's EQEs go ({@code events.c} with the notifier chains of {@code eq.c}): the
 * command completion to the command interface, the page request to the page allocator, a CQ's
 * completion and error to its owner ({@code mlx5_cq_table}), the affiliated events of QPs and
 * SRQs to theirs ({@code rsc_event_notifier}, {@code srq_event_notifier}), the port change to
 * mlx5_ib ({@code mlx5_notifier_register}'s {@code MLX5_EVENT_TYPE_PORT_CHANGE}). The EQs
 * themselves, their interrupts and polling are the core's ({@link Mlx5Eq}).
 *
 * <p>Threads: {@link #eqe} runs on the control vector's interrupt thread, {@link #comp} on the
 * completion vector's; registration runs on the owners' threads. The tables are concurrent maps,
 * the port listener a volatile: a handler registered before its object can raise an event is
 * found by the next EQE.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/net/ethernet/mellanox/mlx5/core/events.c">events.c</a>
 */
final class Mlx5Events {

    /** The affiliated events of QPs and SRQs the async EQ asks for ({@code MLX5_EVENT_TYPE_*} of {@code mlx5_eq_table}'s resource notifier). */
    static final long QP_SRQ_EVENTS = 1L << Eq.EVENT_PATH_MIG | 1L << Eq.EVENT_COMM_EST | 1L << Eq.EVENT_SQ_DRAINED
            | 1L << Eq.EVENT_WQ_CATAS_ERROR | 1L << Eq.EVENT_PATH_MIG_FAILED | 1L << Eq.EVENT_WQ_INVAL_REQ_ERROR
            | 1L << Eq.EVENT_WQ_ACCESS_ERROR | 1L << Eq.EVENT_SRQ_CATAS_ERROR | 1L << Eq.EVENT_SRQ_LAST_WQE | 1L << Eq.EVENT_SRQ_RQ_LIMIT;

    /**
     * {@code gather_async_events_mask}: the async EQ's events, the affiliated events of QPs and
     * SRQs, the CQ error, port changes and internal errors.
     */
    static final long ASYNC_EVENTS = 1L << Eq.EVENT_CQ_ERROR | 1L << Eq.EVENT_INTERNAL_ERROR | 1L << Eq.EVENT_PORT_CHANGE | QP_SRQ_EVENTS
            | 1L << Eq.EVENT_OBJECT_CHANGE;

    private final CmdIf cmd;
    private final PageAlloc pages;
    private volatile PortEvents portEvents;
    /** DevX's listener of general objects' changes ({@code MLX5_EVENT_TYPE_OBJECT_CHANGE}), or null. */
    private volatile Mlx5CoreDev.ObjectEvents objectEvents;
    /** cqn → its owner's handlers ({@code mlx5_cq_table}); read by the EQ threads. */
    private final ConcurrentHashMap<Integer, CqEvents> cqTable = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, ResourceEvents> qpEvents = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, ResourceEvents> srqEvents = new ConcurrentHashMap<>();

    Mlx5Events(CmdIf cmd, PageAlloc pages) {
        this.cmd = cmd;
        this.pages = pages;
    }

    void setPortEvents(PortEvents h) {
        portEvents = h;
    }

    void setObjectEvents(Mlx5CoreDev.ObjectEvents h) {
        objectEvents = h;
    }

    void registerCq(int cqn, CqEvents h) {
        cqTable.put(cqn, h);
    }

    void unregisterCq(int cqn) {
        cqTable.remove(cqn);
    }

    void registerQp(int qpn, ResourceEvents h) {
        qpEvents.put(qpn, h);
    }

    void unregisterQp(int qpn) {
        qpEvents.remove(qpn);
    }

    void registerSrq(int srqn, ResourceEvents h) {
        srqEvents.put(srqn, h);
    }

    void unregisterSrq(int srqn) {
        srqEvents.remove(srqn);
    }

    /** At unload, once the async and completion EQs are gone: no object's handler is kept past its device. */
    void clearTables() {
        cqTable.clear();
        qpEvents.clear();
        srqEvents.clear();
    }

    /** The completion vector's EQE ({@code mlx5_eq_comp_int}): it names a CQ, whose owner polls it. */
    void comp(int type, int subType, MemorySegment data) {
        CqEvents h = cqTable.get(data.get(BE32, 0x18) & 0xff_ffff);
        if (h != null) {
            h.completion();
        }
    }

    /** A control EQ's EQE ({@code mlx5_eq_async_int}'s notifier call): handed to whoever listens for its type. */
    void eqe(int type, int subType, MemorySegment data) {
        switch (type) {
            case Eq.EVENT_CMD -> cmd.complete(data.get(BE32, 0));
            case Eq.EVENT_PAGE_REQUEST -> pages.request(data.get(BE32, Eq.PAGE_REQ_NUM_PAGES - Eq.EQE_DATA));
            case Eq.EVENT_CQ_ERROR -> {
                CqEvents h = cqTable.get(data.get(BE32, 0) & 0xff_ffff);
                if (h != null) {
                    h.error();
                }
            }
            case Eq.EVENT_OBJECT_CHANGE -> {
                Mlx5CoreDev.ObjectEvents h = objectEvents;
                if (h != null) {
                    h.objectChange(data.get(org.peerdirect.hca.cx4.ifc.CmdEntry.BE16, Eq.OBJ_CHANGE_TYPE) & 0xffff, data.get(BE32, Eq.OBJ_CHANGE_ID));
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
}
