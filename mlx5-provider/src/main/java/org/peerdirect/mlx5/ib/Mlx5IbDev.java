package org.peerdirect.mlx5.ib;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Odp;
import org.peerdirect.hca.cx4.ifc.InitSeg;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Vport;
import org.peerdirect.ib.core.provider.IbDeviceEvents;
import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.provider.IbUcontextOps;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx5.core.Mlx5CmdException;
import org.peerdirect.mlx5.core.Mlx5CoreDev;
import org.peerdirect.mlx5.lib.Mlx5Qp;

/**
 * {@code struct mlx5_ib_dev}: the IB device {@code mlx5_ib} registers for one {@code mlx5_core}
 * device. It reaches the hardware only through the core's commands ({@link #cmd}); the attributes
 * come from the capabilities the core queried, the port from {@code QUERY_HCA_VPORT_CONTEXT} and
 * {@code QUERY_HCA_VPORT_GID}. It is also the DMA device its umems are mapped for.
 */
public final class Mlx5IbDev implements IbDeviceOps, DmaDevice {

    /** Inline bytes one WQE may carry (the model's per-WQE limit). */
    public static final int MAX_INLINE = 512;
    /** The core's port-event dispatcher while registered. */
    private volatile IbDeviceEvents events;

    final Mlx5CoreDev core;
    final UmemService umems;
    private final IbvDeviceAttr attr;
    private final boolean ethernet;
    /** The key byte of each new mkey ({@code mlx5_ib_dev.mkey_key}), advancing so a stale key misses the new mkey. */
    final java.util.concurrent.atomic.AtomicInteger mkeyKey = new java.util.concurrent.atomic.AtomicInteger();
    /** qpn → the library's QP, for the CQE path ({@code mlx5_find_qp} of libmlx5's context). */
    public final Mlx5Qp[] qpTable;
    /**
     * srqn → the library's SRQ: where a receive CQE that names an SRQ ({@code srqn}) finds the WQE
     * it completes ({@code mlx5_find_srq}); an XRC receive's QP (the target) is not the library's.
     */
    public final org.peerdirect.mlx5.lib.Mlx5Srq[] srqTable;
    /** The XRC domain every XRC send QP is created in (mlx5_ib's {@code devr->xrcdn1}); 0 until the first one. Guarded by this. */
    private int xrcdnInitiators;
    /** The library's queue buffers pinned for this device and not released yet (the reset flow releases them). */
    final java.util.Set<Mlx5IbUcontext.Pinned> pins = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /** Where a QP's WQEs are, for the page-fault handler ({@code mlx5_ib_read_wqe_sq}/{@code _rq}). */
    record QpBuf(Mlx5IbUcontext.Pinned pinned, long sqOffset, int sqBbs, int rqWqes, int rqStride, boolean ud) {
    }

    /** Where an SRQ's WQEs are ({@code mlx5_ib_read_wqe_srq}). */
    record SrqBuf(Mlx5IbUcontext.Pinned pinned, int wqes, int stride) {
    }

    /** qpn → its queue buffer, srqn → its WQE list (QPs and SRQs created through this device). */
    final java.util.concurrent.ConcurrentHashMap<Integer, QpBuf> qpBufs = new java.util.concurrent.ConcurrentHashMap<>();
    final java.util.concurrent.ConcurrentHashMap<Integer, SrqBuf> srqBufs = new java.util.concurrent.ConcurrentHashMap<>();

    public Mlx5IbDev(Mlx5CoreDev core, UmemService umems) {
        this.core = core;
        this.umems = umems;
        this.ethernet = core.cap(HcaCap.PORT_TYPE) == HcaCap.PORT_TYPE_ETH;
        core.setPortEvents(this::portChange);
        core.setObjectEvents(this::objectChange);
        this.qpTable = new Mlx5Qp[1 << Math.min(18, core.cap(HcaCap.LOG_MAX_QP))];
        this.srqTable = new org.peerdirect.mlx5.lib.Mlx5Srq[1 << Math.min(18, core.cap(HcaCap.LOG_MAX_SRQ))];
        int fw = core.function().read32be(0, InitSeg.FW_REV);
        int sub = core.function().read32be(0, InitSeg.CMDIF_REV_FW_SUB) & 0xffff;
        String fwVer = (fw & 0xffff) + "." + (fw >>> 16) + "." + sub;
        long guid = queryVport(1).get(BE64, Vport.OUT_CONTEXT + Vport.NODE_GUID);
        int maxSge = Math.min(core.cap(HcaCap.MAX_WQE_SZ_RQ) / 16, 32);
        this.attr = new IbvDeviceAttr(fwVer, guid, guid, -1L, 0xffff_f000L, 0x02c9, core.function().deviceId(), 0,
                1 << core.cap(HcaCap.LOG_MAX_QP), 1 << core.cap(HcaCap.LOG_MAX_QP_SZ),
                core.cap(HcaCap.XRC) != 0 ? (int) IbvDeviceAttr.DEVICE_XRC : 0, maxSge, 1 << core.cap(HcaCap.LOG_MAX_CQ),
                (1 << core.cap(HcaCap.LOG_MAX_CQ_SZ)) - 1, 1 << core.cap(HcaCap.LOG_MAX_MKEY), 1 << core.cap(HcaCap.LOG_MAX_PD),
                1 << core.cap(HcaCap.LOG_MAX_RA_RES_QP), 1 << core.cap(HcaCap.LOG_MAX_RA_REQ_QP), IbvDeviceAttr.ATOMIC_HCA,
                1 << core.cap(HcaCap.LOG_MAX_SRQ), (1 << core.cap(HcaCap.LOG_MAX_SRQ_SZ)) - 1, maxSge - 1, MAX_INLINE,
                core.cap(HcaCap.NUM_PORTS), odpCaps(core), (core.cap(HcaCap.ATOMIC_WRITE) != 0 ? IbvDeviceAttr.DEVICE_ATOMIC_WRITE : 0)
                        | (core.cap(HcaCap.FLUSH_GLOBAL) != 0 ? IbvDeviceAttr.DEVICE_FLUSH_GLOBAL : 0)
                        | (core.cap(HcaCap.FLUSH_PERSISTENT) != 0 ? IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT : 0));
    }

    /**
     * {@code mlx5_ib_internal_fill_odp_caps}: nothing without {@code pg}; else ODP, the per-transport
     * bits the firmware's ODP block reports (UD: send and SRQ receive only, as mlx5 reads them), the
     * largest MR UMR can load (unbounded with the extended translation offset, else 2^16 octowords
     * of 4 KiB pages: 256 MiB), and implicit ODP where {@code fixed_buffer_size}, {@code null_mkey}
     * and the extended translation offset are all reported.
     */
    static IbvDeviceAttr.OdpCaps odpCaps(Mlx5CoreDev core) {
        if (core.cap(HcaCap.PG) == 0) {
            return IbvDeviceAttr.OdpCaps.NONE;
        }
        int ud = core.odpCap(Odp.UD_ODP_CAPS);
        int udBits = ((ud & Odp.CAP_SEND) != 0 ? IbvDeviceAttr.OdpCaps.SUPPORT_SEND : 0)
                | ((ud & Odp.CAP_SRQ_RECEIVE) != 0 ? IbvDeviceAttr.OdpCaps.SUPPORT_SRQ_RECV : 0);
        long max = core.cap(HcaCap.UMR_EXTENDED_TRANSLATION_OFFSET) != 0 ? -1L : 1L << (16 + 12);
        // implicit ODP: a KSM parent of fixed-size entries, the null mkey for the entries without a
        // child, and UMR offsets beyond 2^16 octowords (umr_indirect_mkey_disabled is not modelled: clear)
        long general = IbvDeviceAttr.ODP_SUPPORT | (core.cap(HcaCap.FIXED_BUFFER_SIZE) != 0 && core.cap(HcaCap.NULL_MKEY) != 0
                && core.cap(HcaCap.UMR_EXTENDED_TRANSLATION_OFFSET) != 0 ? IbvDeviceAttr.ODP_SUPPORT_IMPLICIT : 0);
        // an ATOMIC WRITE faults as an RDMA WRITE does: RC carries it over ODP wherever writes fault
        int rc = transportBits(core.odpCap(Odp.RC_ODP_CAPS));
        if (core.cap(HcaCap.ATOMIC_WRITE) != 0 && (rc & IbvDeviceAttr.OdpCaps.SUPPORT_WRITE) != 0) {
            rc |= IbvDeviceAttr.OdpCaps.SUPPORT_ATOMIC_WRITE;
        }
        // a FLUSH never faults (it flushes the pages present; the persistent type is refused on ODP MRs): RC carries it
        if (core.cap(HcaCap.FLUSH_GLOBAL) != 0 && (rc & IbvDeviceAttr.OdpCaps.SUPPORT_WRITE) != 0) {
            rc |= IbvDeviceAttr.OdpCaps.SUPPORT_FLUSH;
        }
        return new IbvDeviceAttr.OdpCaps(general, rc, 0, udBits,
                transportBits(core.odpCap(Odp.XRC_ODP_CAPS)), max);
    }

    /** The six firmware bits (send first) as {@code IB_ODP_SUPPORT_*} (send lowest). */
    private static int transportBits(int fw) {
        int bits = 0;
        int[] order = { Odp.CAP_SEND, Odp.CAP_RECEIVE, Odp.CAP_WRITE, Odp.CAP_READ, Odp.CAP_ATOMIC, Odp.CAP_SRQ_RECEIVE };
        for (int i = 0; i < order.length; i++) {
            bits |= (fw & order[i]) != 0 ? 1 << i : 0;
        }
        return bits;
    }

    @Override
    public String name() {
        return core.name();
    }

    @Override
    public String driver() {
        return "mlx5";
    }

    @Override
    public long nodeGuid() {
        return attr.nodeGuid();
    }

    @Override
    public DmaMapper dma() {
        return core.function().dma();
    }

    /** mlx5's attributes: from the general capabilities (max_srq_sge = max_sge - 1, as mlx5_ib) and the ODP block. */
    @Override
    public IbvDeviceAttr queryDevice() {
        return attr;
    }

    private MemorySegment queryVport(int port) {
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.QUERY_HCA_VPORT_CONTEXT, 0, 16);
        Vport.IN_PORT_NUM.set(in, 0, port);
        return cmd(() -> core.exec(in, Vport.CONTEXT_OUT_LEN));
    }

    /** {@code mlx5_query_port}: the vport context; an Ethernet port reports no LID. */
    @Override
    public IbvPortAttr queryPort(int port) {
        MemorySegment out = queryVport(port);
        long c = Vport.OUT_CONTEXT;
        int state = Vport.PORT_STATE.get(out, c);
        // mlx5_get_gid_table_len: 8 << gid_table_size entries
        int gidTblLen = 8 << Math.min(4, core.cap(HcaCap.GID_TABLE_SIZE));
        return new IbvPortAttr(state, 5, 5, gidTblLen, 0x02514868, 1L << core.cap(HcaCap.LOG_MAX_MSG), 128, Vport.LID.get(out, c),
                Vport.SM_LID.get(out, c), 0, 4, 0, 2, ethernet ? 64 : 32, Vport.PORT_PHYSICAL_STATE.get(out, c),
                ethernet ? IbvPortAttr.LINK_LAYER_ETHERNET : IbvPortAttr.LINK_LAYER_INFINIBAND);
    }

    /** {@code mlx5_ib_get_netdev}: the port's netdev from the link register ({@link Mlx5Netdev}); none on InfiniBand. */
    @Override
    public org.peerdirect.ib.core.verbs.IbvNetdev getNetdev(int port) {
        return Mlx5Netdev.query(this, ethernet, core.function().bdf(), port);
    }

    /** {@code mlx5_query_gid}: the vport's GID table (RoCE v2: the IPv4-mapped address, then the link-local; IB: fe80::port GUID; unused entries all zeros). */
    @Override
    public String queryGid(int port, int index) {
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.QUERY_HCA_VPORT_GID, 0, 16);
        Vport.IN_PORT_NUM.set(in, 0, port);
        Vport.IN_GID_INDEX.set(in, 0, index);
        MemorySegment out = cmd(() -> core.exec(in, Vport.GID_OUT_LEN));
        return IbvGid.format(out.asSlice(Vport.OUT_GID, 16).toArray(ValueLayout.JAVA_BYTE));
    }

    /** {@code process_mad}'s PMA part: PortCounters from PPCNT, PortCountersExtended from the vport counters ({@link Mlx5Counters}). */
    @Override
    public Map<String, Long> queryPmaCounters(int port) {
        return Mlx5Counters.queryPma(this, port);
    }

    /** {@code get_hw_stats}: the port's q counters ({@link Mlx5Counters}). */
    @Override
    public Map<String, Long> getHwStats(int port) {
        return Mlx5Counters.queryQ(this, port);
    }

    @Override
    public IbUcontextOps allocUcontext(AddressSpace process) {
        // mlx5_ib_alloc_ucontext: the DevX uid first (when the device has DevX), then the context's UAR of that uid
        int uid = Mlx5Devx.createUid(this);
        int uar;
        try {
            MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.ALLOC_UAR, 0, 16);
            org.peerdirect.hca.cx4.ifc.Devx.UID.set(in, 0, uid);
            uar = Pages.INDEX24.get(cmd(() -> core.exec(in, 16)), 0);
        } catch (RuntimeException e) {
            Mlx5Devx.destroyUid(this, uid);
            throw e;
        }
        Mlx5IbUcontext c = new Mlx5IbUcontext(this, process, uar, uid);
        if (c.devx != null) {
            devxContexts.add(c.devx);
        }
        return c;
    }

    /** The DevX parts of the open contexts, for object events ({@code devx_event_notifier}). */
    final java.util.Set<Mlx5Devx> devxContexts = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /** {@code OBJECT_CHANGE}: to the channels subscribed to the object, in every context (a uid's objects are its own). */
    void objectChange(int objType, int objId) {
        for (Mlx5Devx d : devxContexts) {
            d.events.deliver(org.peerdirect.hca.cx4.ifc.Eq.EVENT_OBJECT_CHANGE, objType, objId);
        }
    }

    /** A command that gives back an index at output byte 0x09 ({@code ALLOC_PD}, {@code CREATE_CQ}, ...). */
    int execIndex(MemorySegment in, int outLen) {
        return Pages.INDEX24.get(cmd(() -> core.exec(in, outLen)), 0);
    }

    /** A command that takes an index at input byte 0x09 ({@code DEALLOC_PD}, {@code DESTROY_CQ}, ...). */
    void execOnIndex(int opcode, int index) {
        MemorySegment in = Mlx5CoreDev.input(opcode, 0, 16);
        Pages.INDEX24.set(in, 0, index);
        cmd(() -> core.exec(in, 16));
    }

    /**
     * A destroy during teardown or after the device went: a device that cannot take commands any
     * more holds nothing (its objects went with it), so that is not an error.
     */
    void destroyQuietly(int opcode, int index) {
        try {
            execOnIndex(opcode, index);
        } catch (KernelException e) {
            if (core.isUp()) {
                throw e;
            }
        }
    }

    /** Runs a command; a refusal becomes the errno {@code mlx5_cmd_check} gives, with the firmware's complaint. */
    <T> T cmd(Supplier<T> c) {
        try {
            return c.get();
        } catch (Mlx5CmdException e) {
            Errno errno = switch (e.errno()) {
                case -16 -> Errno.EBUSY;
                case -12 -> Errno.ENOMEM;
                case -11 -> Errno.EAGAIN;
                case -22 -> Errno.EINVAL;
                default -> Errno.EIO; // -EIO, -ETIMEDOUT, -EREMOTEIO, -ENXIO
            };
            throw new KernelException(errno, name() + ": " + e.getMessage());
        }
    }

    @Override
    public String toString() {
        return name() + " (" + core.function().bdf() + ")";
    }

    /** Guarded by this: the UMR channel and the mkey cache, made at the first registration; closed by {@link #close}. */
    private Mlx5Umr umr;
    private Mlx5MkeyCache mkeyCache;
    /** Guarded by this: the page-fault EQ and work, made with the first ODP MR. */
    private Mlx5Odp odp;
    private boolean closed;
    private Mlx5MkeyCache.Settings cacheSettings = Mlx5MkeyCache.Settings.DEFAULT;

    /** The cache's timing (tests shorten the temporary entries' 30 s); before the first registration. */
    synchronized void cacheSettings(Mlx5MkeyCache.Settings s) {
        cacheSettings = s;
    }

    /**
     * {@code mlx5r_umr_resource_init} and {@code mlx5_mkey_cache_init}, on first use: the UMR QP
     * and the cache. EIO after {@link #close}.
     */
    synchronized Mlx5Umr umr() {
        if (closed) {
            throw new KernelException(Errno.EIO, name() + ": the device is unregistered");
        }
        if (umr == null) {
            umr = new Mlx5Umr(this);
            mkeyCache = new Mlx5MkeyCache(this, umr, cacheSettings);
        }
        return umr;
    }

    /** {@code mlx5r_odp_create_eq} on first use. EIO after {@link #close}. */
    synchronized Mlx5Odp odp() {
        if (closed) {
            throw new KernelException(Errno.EIO, name() + ": the device is unregistered");
        }
        if (odp == null) {
            odp = new Mlx5Odp(this);
        }
        return odp;
    }

    /** The ODP state for tools: null before the first ODP MR. */
    synchronized Mlx5Odp odpIfStarted() {
        return odp;
    }

    /** What {@code rdma:odp_stats} shows: the page-fault EQ's counters and each ODP MR's. */
    public synchronized java.util.List<String> odpStats() {
        if (odp == null) {
            return java.util.List.of(name() + ": no ODP MR registered yet (no page-fault EQ)");
        }
        java.util.List<String> out = new java.util.ArrayList<>();
        out.add(name() + ": " + odp.describe());
        for (Mlx5Odp.OdpMkey mr : odp.odpMkeys()) { // each MR kind describes itself
            out.add(name() + ": " + mr);
        }
        return out;
    }

    synchronized Mlx5MkeyCache mkeyCache() {
        umr();
        return mkeyCache;
    }

    /** {@code cache_ent_find_and_store}; false when the cache is gone or never started (the caller destroys the mkey). */
    synchronized boolean mkeyCacheStore(int mkey, Mlx5MkeyCache.RbKey key, boolean fromCache) {
        return mkeyCache != null && !closed && mkeyCache.store(mkey, key, fromCache);
    }

    /** What {@code mlx5:mkey_cache} shows for this device. */
    public synchronized String mkeyCacheSummary(boolean all) {
        if (mkeyCache == null) {
            return name() + ": mkey cache not started (no registration yet)";
        }
        java.util.List<String> lines = mkeyCache.describe(all);
        return name() + ": mkey cache, " + mkeyCache.cached() + " mkeys cached; UMR WQEs posted " + umr.posted.get()
                + (lines.isEmpty() ? "" : "\n" + String.join("\n", lines));
    }

    /** debugfs {@code mr_cache/NDESCS/limit}. */
    public void setMkeyCacheLimit(int ndescs, int limit) {
        mkeyCache().setLimit(ndescs, limit);
    }

    /**
     * The driver's own teardown after unregistration (the user's MRs are deregistered by then):
     * {@code mlx5_mkey_cache_cleanup}, then {@code mlx5r_umr_resource_cleanup}. Idempotent; quiet on
     * a dead device (its objects went with it).
     */
    /**
     * {@code mlx5_ib_handle_event}'s port change: DOWN and ACTIVE (and INITIALIZED) as PORT_ERR /
     * PORT_ACTIVE, LID, P_Key, GUID and client re-registration as their events. On RoCE the kernel
     * takes link up/down from the netdev instead; the model has no netdev, so its link change
     * stands for the carrier.
     */
    private void portChange(int port, int subtype) {
        IbDeviceEvents h = events;
        IbvEventType t = switch (subtype) {
            case Eq.PORT_CHANGE_SUBTYPE_ACTIVE -> IbvEventType.PORT_ACTIVE;
            case Eq.PORT_CHANGE_SUBTYPE_DOWN, Eq.PORT_CHANGE_SUBTYPE_INITIALIZED -> IbvEventType.PORT_ERR;
            case Eq.PORT_CHANGE_SUBTYPE_LID -> IbvEventType.LID_CHANGE;
            case Eq.PORT_CHANGE_SUBTYPE_PKEY -> IbvEventType.PKEY_CHANGE;
            case Eq.PORT_CHANGE_SUBTYPE_GUID -> IbvEventType.GID_CHANGE;
            case Eq.PORT_CHANGE_SUBTYPE_CLIENT_REREG -> IbvEventType.CLIENT_REREGISTER;
            default -> null;
        };
        if (h != null && t != null) {
            h.portEvent(port, t);
        }
    }

    @Override
    public void setEventHandler(IbDeviceEvents h) {
        events = h;
    }

    /** {@code ALLOC_XRCD} ({@code mlx5_cmd_xrcd_alloc}). */
    int allocXrcd() {
        return execIndex(Mlx5CoreDev.input(Mlx5Cmd.ALLOC_XRCD, 0, 16), 16);
    }

    /** The XRC send QPs' domain ({@code devr->xrcdn1}), allocated with the first of them and kept until {@link #close}. */
    synchronized int xrcdForInitiators() {
        if (xrcdnInitiators == 0) {
            xrcdnInitiators = allocXrcd();
        }
        return xrcdnInitiators;
    }

    public void close() {
        core.setPortEvents(null);
        core.setObjectEvents(null);
        int xrcdn;
        synchronized (this) {
            xrcdn = xrcdnInitiators;
            xrcdnInitiators = 0;
        }
        if (xrcdn != 0) {
            destroyQuietly(Mlx5Cmd.DEALLOC_XRCD, xrcdn);
        }
        Mlx5Umr u;
        Mlx5MkeyCache c;
        Mlx5Odp o;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            u = umr;
            c = mkeyCache;
            o = odp;
        }
        if (o != null) {
            o.destroy();
        }
        try {
            if (c != null) {
                c.cleanup();
            }
        } finally {
            if (u != null) {
                u.destroy();
            }
        }
    }

    /**
     * {@code mlx5_ib_handle_internal_error}: the device is dead or gone; every QP goes to ERR and
     * its CQs complete its outstanding work in software (WR_FLUSH_ERR), since the device never
     * will. The queue buffers' umems are released here, as the core's disassociation destroys
     * the hardware objects on removal ({@code uverbs_destroy_ufile_hw}): their DMA mappings must
     * go before the function's IOMMU domain does; the user's later destroy frees the rest. Called
     * by the driver when it unregisters a device that is no longer up.
     */
    public void internalError() {
        for (Mlx5Qp qp : qpTable) {
            if (qp != null) {
                qp.internalError();
            }
        }
        for (Mlx5IbUcontext.Pinned p : List.copyOf(pins)) {
            p.releaseDma();
        }
    }
}
