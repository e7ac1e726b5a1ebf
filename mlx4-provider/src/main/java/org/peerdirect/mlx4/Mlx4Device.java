package org.peerdirect.mlx4;

import static org.peerdirect.hca.cx3.ifc.Be.BE16;
import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;
import static org.peerdirect.hca.cx3.ifc.Be.U8;

import java.lang.foreign.MemorySegment;
import java.util.BitSet;

import org.peerdirect.hca.cx3.ifc.DiagRprt;
import org.peerdirect.hca.cx3.ifc.Mad;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.cx3.ifc.Uar;
import org.peerdirect.ib.core.provider.IbDeviceEvents;
import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.provider.IbUcontextOps;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.mlx4.core.Mlx4Dev;

/**
 * {@code struct mlx4_ib_dev}: the device the driver registers with the IB core for one ConnectX-3
 * function, on top of {@code mlx4_core}'s {@link Mlx4Dev} (bring-up through the HCR, EQs). It is
 * also the DMA device its umems are mapped for. It keeps the QP, CQ and SRQ tables the EQ
 * handlers index by number ({@code mlx4_cq_completion}, {@code mlx4_qp_event}). It reaches the
 * device only through its PCI function: commands through the HCR ({@link Mlx4Dev}), doorbells
 * and BlueFlame through the UAR pages (the library's, {@link org.peerdirect.mlx4.lib}), and
 * descriptors in memory: CQs are the driver's rings of CQE bytes ({@link Mlx4Cq}); QPs and SRQs
 * are the library's buffers of WQE bytes in the user's process ({@link Mlx4IbQp},
 * {@link Mlx4IbSrq}).
 */
public final class Mlx4Device implements IbDeviceOps, DmaDevice, Mlx4Dev.Events {

    /** {@code MLX4_IB_SQ_MAX_SPARE}: WQEs of a send queue kept back from max_qp_wr. */
    static final int SQ_MAX_SPARE = 33;
    /** The inline data libmlx4 puts in one send WQE. */
    static final int MAX_INLINE = 912;
    /** Command timeout ({@code MLX4_CMD_TIME_CLASS_A} is 60 s; a model answers at once). */
    static final long CMD_TIMEOUT_NANOS = 10_000_000_000L;

    final String name;
    final Mlx4Dev core;
    private final PciFunction fn;
    /** The function's DMA mapping calls ({@code &pdev->dev}). */
    private final DmaMapper dma;
    final UmemService umems;
    /** qpn → driver QP, for CQEs; written on create/destroy, read by pollers (plain array of final-field objects). */
    final Mlx4IbQp[] qpTable;
    /** cqn → driver CQ, for events. */
    final Mlx4Cq[] cqTable;
    final Mlx4IbSrq[] srqTable;
    /** The library's queue buffers pinned for this device and not released yet (a removal releases them). */
    final java.util.Set<Mlx4Context.Pinned> pins = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** The core's port-event dispatcher while registered. */
    private volatile IbDeviceEvents events;
    /** PD numbers in use ({@code mlx4_pd_alloc}'s bitmap); guarded by itself. */
    private final BitSet pdns = new BitSet();
    private final IbvDeviceAttr attr;
    private final long nodeGuid;
    /** QP, CQ, SRQ and UAR numbers ({@code mlx4_bitmap}s of {@code qp_table}, {@code cq_table}, {@code srq_table}, {@code uar_table}). */
    final Numbers qpns;
    final Numbers cqns;
    final Numbers srqns;
    final Numbers uars;

    /**
     * {@code mlx4_init_one} + {@code mlx4_ib_add}: the device behind {@code fn}, brought up through
     * its HCR ({@link Mlx4Dev#load}), its node GUID from the subnet agent (NodeInfo), its limits
     * from QUERY_DEV_CAP.
     *
     * @throws IllegalArgumentException when the function is not a ConnectX-3
     * @throws KernelException when the bring-up fails (the device is left as it was found)
     */
    public Mlx4Device(String name, PciFunction fn, Mm mm, UmemService umems) {
        if (fn.vendorId() != org.peerdirect.kernel.pci.PciIds.PCI_VENDOR_ID_MELLANOX || fn.deviceId() != Mlx4Driver.PCI_DEVICE_CONNECTX3) {
            throw new IllegalArgumentException(String.format("%s is %04x:%04x, not a ConnectX-3 (15b3:1003)", fn.bdf(), fn.vendorId(), fn.deviceId()));
        }
        this.name = name;
        this.fn = fn;
        this.dma = fn.dma();
        this.umems = umems;
        this.core = new Mlx4Dev(name, fn, mm, CMD_TIMEOUT_NANOS);
        core.load();
        try {
            this.qpTable = new Mlx4IbQp[core.caps().maxQps()];
            this.srqTable = new Mlx4IbSrq[core.caps().maxSrqs()];
            this.cqTable = new Mlx4Cq[core.caps().maxCqs()];
            this.qpns = new Numbers(name + " QP", core.caps().reservedQps(), core.caps().maxQps());
            // the driver's own UAR page first (uarPage()), then one per opened context, below the BlueFlame pages
            this.uars = new Numbers(name + " UAR", core.caps().reservedUars() + 1, (int) (Uar.BF_BASE / Uar.PAGE_SIZE));
            this.cqns = new Numbers(name + " CQ", core.caps().reservedCqs(), core.caps().maxCqs());
            this.srqns = new Numbers(name + " SRQ", core.caps().reservedSrqs(), core.caps().maxSrqs());
            MemorySegment ni = Mlx4Mad.get(core, 1, Mad.ATTR_NODE_INFO);
            this.nodeGuid = ni.get(BE64, Mad.NI_NODE_GUID);
            var c = core.caps();
            int maxQpWr = c.maxQpSz() - SQ_MAX_SPARE;
            this.attr = new IbvDeviceAttr(core.fwInfo().version(), nodeGuid, ni.get(BE64, Mad.NI_SYS_IMAGE_GUID), 0xFFFF_FFFF_FFFF_FFFFL,
                    0xFFFF_FE00L, 0x02c9, ni.get(BE16, Mad.NI_DEVICE_ID) & 0xffff, 0, c.maxQps() - c.reservedQps(), maxQpWr, 0,
                    c.maxSqSg(), c.maxCqs(), c.maxCqSz() - 1, c.maxMpts() - 1, c.maxPds(), c.maxReqQp(), c.maxResQp(),
                    IbvDeviceAttr.ATOMIC_HCA, c.maxSrqs(), maxQpWr, c.maxRqSg(), MAX_INLINE, c.numPorts(), IbvDeviceAttr.OdpCaps.NONE);
        } catch (RuntimeException e) {
            core.unload();
            throw e;
        }
        core.setEvents(this);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public long nodeGuid() {
        return nodeGuid;
    }

    @Override
    public String driver() {
        return "mlx4";
    }

    @Override
    public DmaMapper dma() {
        return dma;
    }

    /** {@code mlx4_core}'s device (the command log, the firmware's answers). */
    public Mlx4Dev core() {
        return core;
    }

    /** mlx4's attributes (a ConnectX-3 with firmware 2.42): no ODP. */
    @Override
    public IbvDeviceAttr queryDevice() {
        return attr;
    }

    /** {@code mlx4_ib_query_port}: PortInfo through MAD_IFC (LID, state), the rest as a ConnectX-3 FDR port has it. */
    @Override
    public IbvPortAttr queryPort(int port) {
        checkPort(port);
        MemorySegment pi = Mlx4Mad.get(core, port, Mad.ATTR_PORT_INFO);
        boolean active = (pi.get(U8, Mad.PI_STATE) & 0xf) == Mad.PORT_STATE_ACTIVE;
        int lid = pi.get(BE16, Mad.PI_LID) & 0xffff;
        return new IbvPortAttr(active ? IbvPortAttr.PORT_ACTIVE : IbvPortAttr.PORT_DOWN, 5, 5, 128, 0x02514868, 0x40000000L,
                128, lid, 1, 0, 8, 0, 2, 16, active ? 5 : 3, IbvPortAttr.LINK_LAYER_INFINIBAND);
    }

    /**
     * {@code process_mad}'s PMA part on an InfiniBand port: the firmware's performance agent
     * answers PortCounters and PortCountersExtended by {@code MAD_IFC}; by the sysfs names.
     */
    @Override
    public java.util.Map<String, Long> queryPmaCounters(int port) {
        checkPort(port);
        MemorySegment pc = Mlx4Mad.get(core, port, Mad.MGMT_CLASS_PERF_MGMT, Mad.ATTR_PORT_COUNTERS);
        MemorySegment ext = Mlx4Mad.get(core, port, Mad.MGMT_CLASS_PERF_MGMT, Mad.ATTR_PORT_COUNTERS_EXT);
        java.util.Map<String, Long> m = new java.util.LinkedHashMap<>();
        m.put("port_rcv_errors", (long) (pc.get(BE16, Mad.PC_PORT_RCV_ERRORS) & 0xffff));
        m.put("port_xmit_discards", (long) (pc.get(BE16, Mad.PC_PORT_XMIT_DISCARDS) & 0xffff));
        m.put("port_xmit_data", ext.get(BE64, Mad.PCE_XMIT_DATA));
        m.put("port_rcv_data", ext.get(BE64, Mad.PCE_RCV_DATA));
        m.put("port_xmit_packets", ext.get(BE64, Mad.PCE_XMIT_PACKETS));
        m.put("port_rcv_packets", ext.get(BE64, Mad.PCE_RCV_PACKETS));
        m.put("unicast_xmit_packets", ext.get(BE64, Mad.PCE_UNICAST_XMIT_PACKETS));
        m.put("unicast_rcv_packets", ext.get(BE64, Mad.PCE_UNICAST_RCV_PACKETS));
        m.put("multicast_xmit_packets", ext.get(BE64, Mad.PCE_MULTICAST_XMIT_PACKETS));
        m.put("multicast_rcv_packets", ext.get(BE64, Mad.PCE_MULTICAST_RCV_PACKETS));
        return m;
    }

    /**
     * {@code mlx4_ib_get_hw_stats} on a port: the transport and CI error counters
     * ({@code diag_basic} then {@code diag_ext}, the per-port set) read by
     * {@code mlx4_query_diag_counters}: one {@code DIAG_RPRT} with
     * {@code MLX4_OP_MOD_QUERY_TRANSPORT_CI_ERRORS}, in_modifier the port, each counter a 32-bit
     * big-endian value at its offset of the output mailbox.
     */
    @Override
    public java.util.Map<String, Long> getHwStats(int port) {
        checkPort(port);
        org.peerdirect.kernel.dma.coherent.DmaCoherentPages.Page out = core.dma.alloc();
        try {
            core.cmd.box(0, out.iova(), port, DiagRprt.OP_MOD_QUERY_TRANSPORT_CI_ERRORS, Mlx4Cmd.DIAG_RPRT);
            java.util.Map<String, Long> m = new java.util.LinkedHashMap<>();
            for (int i = 0; i < DiagRprt.PORT_NAMES.length; i++) {
                m.put(DiagRprt.PORT_NAMES[i], Integer.toUnsignedLong(out.mem().get(BE32, DiagRprt.PORT_OFFSETS[i])));
            }
            return m;
        } finally {
            core.dma.free(out);
        }
    }

    void checkPort(int port) {
        if (port < 1 || port > core.caps().numPorts()) {
            throw new KernelException(Errno.EINVAL, name + ": no port " + port + " (ports 1.." + core.caps().numPorts() + ")");
        }
    }

    @Override
    public String queryGid(int port, int index) {
        if (index != 0) {
            throw new KernelException(Errno.EINVAL, name + ": GID index " + index + " is not populated");
        }
        checkPort(port);
        long g = nodeGuid + port;
        return String.format("fe80:0000:0000:0000:%04x:%04x:%04x:%04x", (g >>> 48) & 0xffff, (g >>> 32) & 0xffff, (g >>> 16) & 0xffff,
                g & 0xffff);
    }

    @Override
    public IbUcontextOps allocUcontext(AddressSpace process) {
        return new Mlx4Context(this, process);
    }

    int allocPdn() {
        synchronized (pdns) {
            int n = pdns.nextClearBit(1);
            if (n >= 1 << 24) {
                throw new KernelException(Errno.ENOMEM, name + ": out of PD numbers");
            }
            pdns.set(n);
            return n;
        }
    }

    void freePdn(int n) {
        synchronized (pdns) {
            pdns.clear(n);
        }
    }

    /** The QPNs, for tests: numbers in use ({@code qp_table}'s bitmap). */
    int qpnsInUse() {
        return qpns.inUse();
    }

    /** {@code mlx4_cq_completion}: the CQ by its number to the core's handler. */
    @Override
    public void cqCompletion(int cqn) {
        Mlx4Cq c = cqn < cqTable.length ? cqTable[cqn] : null;
        if (c != null) {
            c.eventSeen();
            c.events.completion();
        }
    }

    /**
     * A command that gives an object back to software ({@code HW2SW_*}), as {@code mlx4_cq_free}
     * and its kind run it: a busy object is refused (EBUSY: a QP still uses it); on a device that
     * is gone, reset or unloaded the object is gone with it, so the failure is only logged.
     */
    void hw2sw(long inParam, int inMod, int op) {
        try {
            core.cmd.cmd(inParam, inMod, 1, op);
        } catch (org.peerdirect.mlx4.core.Mlx4CmdException e) {
            if (e.status() == Mlx4Cmd.STAT_RESOURCE_BUSY || core.loaded() && !core.cmd.gone()) {
                throw e;
            }
        } catch (KernelException e) {
            if (core.loaded() && !core.cmd.gone()) {
                throw e;
            }
        }
    }

    /** The UAR page of the driver's own doorbells (the first not reserved, {@code priv->driver_uar}). */
    int uarPage() {
        return core.caps().reservedUars();
    }

    /** {@code mlx4_cq_event} of a CQ error (an overrun). */
    @Override
    public void cqError(int cqn) {
        Mlx4Cq c = cqn < cqTable.length ? cqTable[cqn] : null;
        if (c != null) {
            c.overrun();
            c.events.error();
        }
    }

    /** {@code mlx4_ib_event}: MLX4_DEV_EVENT_PORT_UP / _DOWN as PORT_ACTIVE / PORT_ERR. */
    @Override
    public void portChange(int port, boolean active) {
        IbDeviceEvents h = events;
        if (h != null) {
            h.portEvent(port, active ? IbvEventType.PORT_ACTIVE : IbvEventType.PORT_ERR);
        }
    }

    /** {@code mlx4_srq_event} → {@code mlx4_ib_srq_event}. */
    @Override
    public void srqEvent(int srqn, int type) {
        Mlx4IbSrq s = srqn >= 0 && srqn < srqTable.length ? srqTable[srqn] : null;
        if (s != null && type == Mlx4Cmd.EVENT_SRQ_LIMIT) {
            s.events.event(IbvEventType.SRQ_LIMIT_REACHED);
        }
    }

    /** {@code mlx4_qp_event} → {@code mlx4_ib_qp_event}: the QP by its number, the type as its IB event. */
    @Override
    public void qpEvent(int qpn, int type) {
        Mlx4IbQp q = qpn >= 0 && qpn < qpTable.length ? qpTable[qpn] : null;
        IbvEventType t = switch (type) {
            case Mlx4Cmd.EVENT_COMM_EST -> IbvEventType.COMM_EST;
            case Mlx4Cmd.EVENT_SRQ_QP_LAST_WQE -> IbvEventType.QP_LAST_WQE_REACHED;
            case Mlx4Cmd.EVENT_WQ_CATAS_ERROR -> IbvEventType.QP_FATAL;
            case Mlx4Cmd.EVENT_WQ_INVAL_REQ_ERROR -> IbvEventType.QP_REQ_ERR;
            case Mlx4Cmd.EVENT_WQ_ACCESS_ERROR -> IbvEventType.QP_ACCESS_ERR;
            default -> null;
        };
        if (q != null && t != null) {
            q.events.event(t);
        }
    }

    @Override
    public void setEventHandler(IbDeviceEvents h) {
        events = h;
    }

    /**
     * The hardware half of {@code mlx4_remove_one}, after the device was unregistered from the core:
     * a surprise removal is {@code mlx4_enter_error_state} (the chip reset: QPs flushed, keys
     * revoked, the port off the fabric; the driver's memory back); a driver unbind is
     * {@code mlx4_unload_one} through the HCR (objects freed, the device ready for the next driver).
     * Idempotent.
     */
    public synchronized void removeHardware(boolean surprise) {
        if (!core.loaded()) {
            return;
        }
        if (surprise) {
            core.enterErrorState();
        } else {
            core.unload();
        }
        // the device flushed what the queues held (it read their WQEs): now their mappings go, while the domain exists
        for (Mlx4Context.Pinned p : java.util.List.copyOf(pins)) {
            p.releaseDma();
        }
    }

    @Override
    public String toString() {
        return name + " (" + fn.bdf() + ")";
    }

    /**
     * {@code mlx4_bitmap}: numbers from {@code reserved} below {@code max}, round-robin from after
     * the last one (a late event of a destroyed object does not meet its successor at once). Thread-safe.
     */
    static final class Numbers {
        private final String what;
        private final BitSet used = new BitSet();
        private final int reserved;
        private final int max;

        Numbers(String what, int reserved, int max) {
            this.what = what;
            this.reserved = reserved;
            this.max = max;
        }

        private int next;

        synchronized int alloc() {
            int n = used.nextClearBit(Math.max(reserved, next));
            if (n >= max) {
                n = used.nextClearBit(reserved);
            }
            if (n >= max) {
                throw new KernelException(Errno.ENOMEM, what + " numbers exhausted (" + (max - reserved) + " in use)");
            }
            used.set(n);
            next = n + 1;
            return n;
        }

        synchronized void free(int n) {
            used.clear(n);
        }

        synchronized int inUse() {
            return used.cardinality();
        }
    }
}
