package org.peerdirect.hca.engine;

import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.hca.boards.SiliconView;
import org.peerdirect.kernel.dma.DmaPort;

/**
 * One HCA's silicon: its protection table (MPT), CQ, SRQ and QP contexts, ports and scheduler.
 * The driver programs it with firmware commands named after mlx4's ({@code SW2HW_MPT},
 * {@code HW2SW_MPT}, {@code SW2HW_CQ}, {@code RST2INIT_QP}, ...), which fail with a
 * {@link HwCommandException} carrying the command status; it posts work by filling WQE slots and
 * writing doorbell records, and reads CQEs. Every payload byte moves through its PCI function's DMA port.
 *
 * <p>Lock rules: {@code this} (the device monitor) guards the object tables' writers and the use
 * counts' check-and-act; readers on the data path read the arrays without a lock. That is safe
 * because the objects stored in {@link Pools} and the {@link MptTable} publish their identity through
 * final fields; their mutable state is volatile or guarded by their own locks.
 */
public final class HcaDevice {

    /** Limits of the model (ConnectX-3-like): {@code QUERY_DEV_CAP}. */
    public static final int MAX_QP = 1 << 16;
    /** QPNs below this are reserved (special QPs, firmware), as on the hardware. */
    public static final int RESERVED_QPS = 0x48;
    public static final int MAX_MPT = 1 << 20;
    public static final int MAX_CQ = 1 << 16;
    public static final int MAX_SRQ = 1 << 16;
    public static final int MAX_QP_WR = 16351;
    public static final int MAX_SGE = 32;
    public static final int MAX_CQE = 4194303;
    public static final int MAX_INLINE = 912;
    public static final int MTU = 4096;
    /**
     * The longest message (bytes) a request may carry: what both personalities report
     * ({@code max_msg_sz} 0x40000000 on the ConnectX-3, {@code log_max_msg} 30 on the ConnectX-4);
     * a longer one completes with a local length error before anything moves.
     */
    public static final long MAX_MSG_SZ = 1L << 30;
    /** QP service types ({@code MLX4_QP_ST_*}). */
    public static final int ST_RC = 0x0;
    public static final int ST_UD = 0x3;
    /** XRC ({@code MLX4_QP_ST_XRC}): an initiator or a target QP, see {@link #createXrcQp}. */
    public static final int ST_XRC = 0x6;
    /**
     * A QP that executes UMR work requests only (mlx5's {@code st} REG_UMR, 0xc): the driver's
     * channel for changing mkeys without commands. It talks to no peer.
     */
    public static final int ST_REG_UMR = 0xc;

    /**
     * Queue and CQ sizes as the hardware allocates them: rounded up to a power of two (mlx4's
     * {@code roundup_pow_of_two} of the WQE and CQE counts), so ring indices wrap with a mask.
     */
    public static int roundUpPow2(int n) {
        return n <= 1 ? 1 : Integer.highestOneBit(n - 1) << 1;
    }

    /** MPT access bits ({@code enum mlx4_perm}). */
    public static final int PERM_LOCAL_READ = 1 << 10;
    public static final int PERM_LOCAL_WRITE = 1 << 11;
    public static final int PERM_REMOTE_READ = 1 << 12;
    public static final int PERM_REMOTE_WRITE = 1 << 13;
    public static final int PERM_ATOMIC = 1 << 14;
    /** Model-only MPT rights: remote RDMA FLUSH with the global / persistent placement type ({@code IB_ACCESS_FLUSH_*}). */
    public static final int PERM_FLUSH_GLOBAL = 1 << 15;
    public static final int PERM_FLUSH_PERSISTENT = 1 << 16;

    final String name;
    final DmaPort domain;
    final Fabric fabric;
    /** The ports' link layer: Ethernet (RoCE) or InfiniBand. */
    final boolean ethernet;
    final HcaPort[] ports;
    /** The protection table: entries, indices, UMR execution. */
    private final MptTable mptTable = new MptTable(this);
    /** The numbered objects: QPs, CQs, SRQs and their tables (guarded by this). */
    private final Pools pools = new Pools(this);
    final Scheduler scheduler;
    volatile CqEventHandler eventHandler;
    volatile AsyncEventHandler asyncHandler;
    volatile PageFaultHandler pageFaultHandler;
    /** Faults raised and not yet resumed: token to the QP that waits (requester) or NAKs (responder). */
    private final PendingFaults pendingFaults = new PendingFaults();
    volatile boolean removed;
    /** Completions whose CQ was full (CQ overrun: the CQ went to error). */
    final AtomicLong cqOverruns = new AtomicLong();
    /** Requests or drains the engine failed on an exception of its own ({@link #engineFailures}). */
    final AtomicLong engineFailures = new AtomicLong();
    final AtomicLong rnrNaks = new AtomicLong();
    final AtomicLong retries = new AtomicLong();

    public HcaDevice(String name, DmaPort domain, Fabric fabric, int nports) {
        this(name, domain, fabric, nports, false);
    }

    /**
     * A device whose ports are InfiniBand, or Ethernet ({@code ethernet}, RoCE). Both kinds get
     * an endpoint on the one {@link Fabric}, but they are two networks: a packet from an
     * Ethernet port never reaches an InfiniBand port or the converse (it is lost, and an RC
     * requester ends in a transport retry error, as a misaddressed packet does on real links).
     */
    public HcaDevice(String name, DmaPort domain, Fabric fabric, int nports, boolean ethernet) {
        this.ethernet = ethernet;
        this.name = name;
        this.domain = domain;
        this.fabric = fabric;
        this.ports = new HcaPort[nports];
        for (int i = 0; i < nports; i++) {
            ports[i] = new HcaPort(this, i + 1);
            ports[i].lid = fabric.attach(ports[i]);
            ports[i].active = true;
        }
        scheduler = new Scheduler(name);
    }

    /** The ports' GID 0 as the personality names it ({@link #setPortGid}); the link-local LID form until then. */
    private volatile PortGid portGid = PortGid.LINK_LOCAL_OF_LID;

    /** Set by the personality at bring-up, before any traffic. */
    public void setPortGid(PortGid g) {
        portGid = g;
    }

    void writePortGid(HcaPort p, java.lang.foreign.MemorySegment to, long off) {
        portGid.write(p, to, off);
    }

    /** Puts Ethernet port {@code portNum} on a wire ({@link WirePort#attach}): its connected QPs talk RoCEv2 over {@code link}. */
    public WirePort attachWire(int portNum, org.peerdirect.hca.wire.Link link, int ip, long mac, int mtu) {
        return WirePort.attach(this, port(portNum), link, ip, mac, mtu);
    }

    /** Takes port {@code portNum} off its wire ({@link WirePort#detach}). */
    public void detachWire(int portNum) {
        WirePort.detach(port(portNum));
    }

    /** True when the ports are Ethernet (RoCE), false for InfiniBand. */
    public boolean ethernet() {
        return ethernet;
    }

    public String name() {
        return name;
    }

    /** What a lab sees of this silicon: counters, tables, a port's cable. */
    public SiliconView view() {
        return new HcaView(this);
    }

    /** The port {@code portNum} (1-based). */
    public HcaPort port(int portNum) {
        if (portNum < 1 || portNum > ports.length) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, name + ": no port " + portNum + " (ports 1.." + ports.length + ")");
        }
        return ports[portNum - 1];
    }

    public int portCount() {
        return ports.length;
    }

    /** Installs the event-queue handler (completion events, CQ errors). */
    public void setEventHandler(CqEventHandler h) {
        eventHandler = h;
    }

    /** The handler of the QPs' and SRQs' asynchronous events (none: they are dropped). */
    public void setAsyncEventHandler(AsyncEventHandler h) {
        asyncHandler = h;
    }

    /**
     * The link of {@code portNum} goes down or comes up (a cable, a switch port, a test): a down
     * port neither sends nor answers, so its QPs' requests and those aimed at it end in
     * {@code RETRY_EXC_ERR} after their retries; the change is reported as a port event. Nothing
     * happens when the state is already {@code up}.
     */
    public void setPortActive(int portNum, boolean up) {
        HcaPort p = port(portNum);
        synchronized (p) {
            if (p.active == up || removed) {
                return;
            }
            p.active = up;
            WirePort w = p.wire;
            if (!up) {
                p.counters.inc(PortCounters.LINK_DOWNED);
            }
            if (w != null && !up) {
                w.counters.inc(org.peerdirect.hca.wire.RxeCounters.LINK_DOWNED);
            }
        }
        toAsyncHandler(h -> h.portEvent(portNum, up ? AsyncEventHandler.PORT_ACTIVE : AsyncEventHandler.PORT_DOWN),
                () -> "port event of port " + portNum);
    }

    /** Reports an asynchronous event, unless the device is gone; a failing handler must not wedge the engine thread. */
    void asyncEvent(int type, int number) {
        toAsyncHandler(h -> h.event(type, number), () -> "async event 0x" + Integer.toHexString(type) + " of 0x" + Integer.toHexString(number));
    }

    /** Calls the async handler, if any and the device is not gone; a failing handler is logged, never thrown into the engine thread. */
    private void toAsyncHandler(java.util.function.Consumer<AsyncEventHandler> call, java.util.function.Supplier<String> what) {
        AsyncEventHandler h = asyncHandler;
        if (h == null || removed) {
            return;
        }
        try {
            call.accept(h);
        } catch (RuntimeException e) {
            System.getLogger("org.peerdirect.hca").log(System.Logger.Level.ERROR, name + ": " + what.get() + " failed", e);
        }
    }

    /**
     * Installs the page-fault EQ's handler (mlx5 creates the page-fault EQ with the first on-demand
     * mkey). Without one, a translation miss fails the access as a protection error.
     */
    public void setPageFaultHandler(PageFaultHandler h) {
        pageFaultHandler = h;
    }

    void alive() {
        if (removed) {
            throw new HwCommandException(HwCommandException.STAT_INTERNAL_ERR, "device " + name + " was removed: commands time out");
        }
    }

    public boolean removed() {
        return removed;
    }

    // ------------------------------------------------------------------ MPT (memory keys): MptTable

    /** {@code SW2HW_MPT} with its MTT: a key valid for [start, start+length) with the {@code PERM_*} rights ({@link MptTable#sw2hwMpt}). */
    public synchronized int sw2hwMpt(int pdn, long start, long length, int perm, long[] mttIova, long[] mttLength) {
        return sw2hwMpt(pdn, start, length, perm, mttIova, mttLength, -1);
    }

    /**
     * mlx4's {@code SW2HW_MPT} at the index the driver allocated ({@code mlx4_mpt_reserve}) with
     * the key byte it chose ({@link MptTable#sw2hwMptAt}).
     */
    public synchronized int sw2hwMptAt(int index, int keyByte, int pdn, long start, long length, int perm, long[] mttIova, long[] mttLength) {
        return mptTable.sw2hwMptAt(index, keyByte, pdn, start, length, perm, mttIova, mttLength);
    }

    /** mlx5's {@code CREATE_MKEY} (access mode MTT) with the key byte the driver chose, -1: rotated ({@link MptTable#sw2hwMpt}). */
    public synchronized int sw2hwMpt(int pdn, long start, long length, int perm, long[] mttIova, long[] mttLength, int keyByteOrMinus1) {
        return mptTable.sw2hwMpt(pdn, start, length, perm, mttIova, mttLength, keyByteOrMinus1);
    }

    /**
     * {@code CREATE_MKEY} (access mode MTT) whose IOVAs address {@code space}, a device-local
     * memory the NIC reaches without the IOMMU (the BlueField-3's DPA memory; null: the function's
     * domain). RDMA through the key reads and writes that space.
     */
    public synchronized int sw2hwMpt(int pdn, long start, long length, int perm, long[] mttIova, long[] mttLength, int keyByteOrMinus1,
            DmaPort space) {
        return mptTable.sw2hwMpt(pdn, start, length, perm, mttIova, mttLength, keyByteOrMinus1, space);
    }

    /** mlx5's {@code CREATE_MKEY} with {@code umr_en}, MTT or KSM ({@link MptTable#createUmrMpt}). */
    public synchronized int createUmrMpt(int pdn, long start, long length, int perm, int pageShift, int capacity, boolean free, long[] mtt,
            int n, int keyByte, boolean indirect) {
        return mptTable.createUmrMpt(pdn, start, length, perm, pageShift, capacity, free, mtt, n, keyByte, indirect);
    }

    /** Executes a REG_UMR QP's UMR work request ({@link MptTable#umr}). */
    Outcome umr(SendWqe w) {
        return mptTable.umr(w);
    }

    /**
     * The null mkey ({@code QUERY_SPECIAL_CONTEXTS}' {@code null_mkey}): a KSM entry pointing at it
     * has no target, and an access through it is a page fault on the indirect key. Index 0 never
     * names an MPT entry (the reserved lkey is key 0), so no entry can have this key.
     */
    public static final int NULL_MKEY = 0x0000_00ff;

    /** UMR work requests executed successfully. */
    public long umrsExecuted() {
        return mptTable.umrsExecuted();
    }

    /** The key of the live MPT entry {@code index} ({@code mkey_index} of mlx5's commands), or -1. */
    public synchronized int mptKeyOfIndex(int index) {
        return mptTable.mptKeyOfIndex(index);
    }

    /** mlx5's {@code CREATE_MKEY} for an on-demand MR: every MTT entry not present ({@link MptTable#sw2hwMptOnDemand}). */
    public synchronized int sw2hwMptOnDemand(int pdn, long start, long length, int perm, int pageShift) {
        return mptTable.sw2hwMptOnDemand(pdn, start, length, perm, pageShift);
    }

    /** {@code UMR} writing translations of an on-demand key ({@link MptTable#umrUpdate}). */
    public void umrUpdate(int key, int first, long[] mtt, int n) {
        mptTable.umrUpdate(key, first, mtt, n);
    }

    /** {@code UMR} with {@code ZAP}: returns when no DMA through the entries is in flight ({@link MptTable#umrZap}). */
    public void umrZap(int key, int first, int n) {
        mptTable.umrZap(key, first, n);
    }

    /** MTT entries present in an on-demand key (what the driver's counters show). */
    public int mttPresent(int key) {
        return mptTable.mttPresent(key);
    }

    /** MTT entry bits for {@link #umrUpdate}. */
    public static final long MTT_READ = Mpt.MTT_READ;
    public static final long MTT_WRITE = Mpt.MTT_WRITE;

    // ------------------------------------------------------------------ page faults

    /**
     * Registers a fault about to be raised (the waiting side records the token first, so a resume
     * racing the event finds it): its token, or 0 when no page-fault handler is installed.
     */
    int pendingFault(HwQp qp, boolean requester, int subtype) {
        if (pageFaultHandler == null) {
            return 0;
        }
        return pendingFaults.register(qp, requester, subtype);
    }

    /** Delivers a registered fault on the page-fault EQ. */
    void raise(PageFault f) {
        PageFaultHandler h = pageFaultHandler;
        if (h != null) {
            h.pageFault(f);
        }
    }

    /**
     * {@code PAGE_FAULT_RESUME} (opcode 0x204): the driver served fault {@code token}. A stalled
     * requester goes on (with {@code error}, its WQE completes with a local protection error and the
     * QP goes to ERR); a responder stops NAKing (with {@code error}, the requester's next try fails
     * with a remote access error, or a remote operation error for a receive WQE). A fault whose QP
     * was reset or flushed meanwhile resumes nothing. An unknown token is a bad parameter.
     */
    public void pageFaultResume(int token, boolean error) {
        alive();
        if (!pendingFaults.resume(token, error)) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, String.format("%s: PAGE_FAULT_RESUME of token 0x%x: no such fault pending", name, token));
        }
    }

    /** Faults raised and not yet resumed. */
    public int pendingPageFaults() {
        return pendingFaults.size();
    }

    public long requesterPageFaults() {
        return pendingFaults.requesterFaults.get();
    }

    public long responderPageFaults() {
        return pendingFaults.responderFaults.get();
    }

    /** {@code HW2SW_MPT}: the key stops working; returns when no DMA through it is in flight. */
    public void hw2swMpt(int key) {
        mptTable.hw2swMpt(key);
    }

    /** Frees the entry's index (after {@link #hw2swMpt}; revokes it too if not done). */
    public synchronized void freeMpt(int key) {
        mptTable.freeMpt(key);
    }

    /** The valid-or-revoked entry for a key, or null when the key names no entry (the data path, no lock). */
    Mpt mpt(int key) {
        return mptTable.mpt(key);
    }

    /** What a non-RDMA user of a key (the DPA's windows) sees of it: PD, rights and range. */
    public record KeyInfo(int pdn, int access, long start, long length) {
    }

    /** The key's PD, rights and range; null when it names no entry or the entry is not valid (revoked, freed). */
    public KeyInfo keyInfo(int key) {
        Mpt m = mptTable.mpt(key);
        return m == null || m.state != Mpt.State.VALID || m.indirect ? null : new KeyInfo(m.pdn, m.access, m.start, m.length);
    }

    /**
     * A local access through a key by a unit of the device other than a QP (the DPA's windows):
     * {@code len} bytes at {@code va} read into (or written from) {@code buf} at {@code off}, by
     * DMA through the key's translation to IOVAs of the function's domain, so the IOMMU audit sees
     * every byte. Under the entry's read lock, as a transfer: a revocation ({@link #hw2swMpt})
     * waits for it and every later access fails. Throws {@link IllegalStateException} when the key
     * is not valid, lacks the right, does not cover the range or (on demand) a page is absent;
     * an IOMMU fault propagates.
     */
    public void keyAccess(int key, long va, java.lang.foreign.MemorySegment buf, long off, long len, boolean write) {
        mptTable.keyAccess(key, va, buf, off, len, write);
    }

    /** MPT entries alive. */
    public synchronized int mptCount() {
        return mptTable.mptCount();
    }

    // ------------------------------------------------------------------ queues: Pools

    /** mlx4's {@code SW2HW_CQ} at the CQN the driver allocated, its CQEs handed to {@code sink} (null: the slot ring). */
    public synchronized HwCq sw2hwCqAt(int cqn, int cqe, CqeSink sink) {
        return pools.sw2hwCqAt(cqn, cqe, sink);
    }

    /** mlx4's {@code SW2HW_SRQ} at the SRQN the driver allocated. */
    public synchronized HwSrq sw2hwSrqAt(int srqn, int pdn, int maxWr, int maxSge) {
        return pools.sw2hwSrqAt(srqn, pdn, maxWr, maxSge);
    }

    /** {@code SW2HW_CQ}. */
    public synchronized HwCq sw2hwCq(int cqe) {
        return pools.sw2hwCq(cqe, null);
    }

    /** {@code CREATE_CQ} of a CQ in host memory: each CQE goes to {@code sink} (null: the slot ring). */
    public synchronized HwCq sw2hwCq(int cqe, CqeSink sink) {
        return pools.sw2hwCq(cqe, sink);
    }

    /** {@code HW2SW_CQ}: refused while a QP uses the CQ. Idempotent. */
    public synchronized void hw2swCq(HwCq cq) {
        pools.hw2swCq(cq);
    }

    /** {@code SW2HW_SRQ}. */
    public synchronized HwSrq sw2hwSrq(int pdn, int maxWr, int maxSge) {
        return pools.newSrq(pdn, -1, null, maxWr, maxSge);
    }

    /** {@code CREATE_XRC_SRQ} / mlx4's XRC {@code SW2HW_SRQ}: an SRQ of XRC domain {@code xrcdn} completing to {@code cq}. */
    public synchronized HwSrq sw2hwXrcSrq(int pdn, int xrcdn, HwCq cq, int maxWr, int maxSge) {
        return pools.sw2hwXrcSrq(pdn, xrcdn, cq, maxWr, maxSge);
    }

    /** The SRQ numbered {@code srqn}, or null (the transport's lookup of an XRCETH's SRQ). */
    HwSrq srq(int srqn) {
        return pools.srq(srqn);
    }

    /** {@code HW2SW_SRQ}: refused while a QP uses the SRQ. Idempotent. */
    public synchronized void hw2swSrq(HwSrq s) {
        pools.hw2swSrq(s);
    }

    /** mlx4's QP at the QPN the driver allocated; as {@link #createQp} otherwise. */
    public synchronized HwQp createQpAt(int qpn, int pdn, int serviceType, QpCaps caps, HwCq scq, HwCq rcq, HwSrq srq) {
        return pools.createQpAt(qpn, pdn, serviceType, caps, scq, rcq, srq);
    }

    /** A QP in RST ({@link #ST_RC} or {@link #ST_UD}) with its CQs and an optional SRQ ({@link Pools#createQp}). */
    public synchronized HwQp createQp(int pdn, int serviceType, QpCaps caps, HwCq scq, HwCq rcq, HwSrq srq) {
        return pools.createQp(pdn, serviceType, caps, scq, rcq, srq);
    }

    /** An XRC QP in RST of domain {@code xrcdn}, initiator or target ({@link Pools#createXrcQp}). */
    public synchronized HwQp createXrcQp(int pdn, int xrcdn, boolean target, QpCaps caps, HwCq scq) {
        return pools.createXrcQp(pdn, xrcdn, target, caps, scq);
    }

    /** Frees a destroyed QP's number and its hold on its CQs and SRQ. */
    synchronized void destroyed(HwQp qp) {
        pools.destroyed(qp);
    }

    HwQp qp(int qpn) {
        return pools.qp(qpn);
    }

    /** The live CQ numbered {@code cqn}, or null (a personality's doorbells name CQs by number). */
    public synchronized HwCq cqByNumber(int cqn) {
        return pools.cqByNumber(cqn);
    }

    /** Every QP alive. */
    public synchronized List<HwQp> qps() {
        return pools.qps();
    }

    /** CQs alive on the device. */
    public synchronized int cqCount() {
        return pools.cqCount();
    }

    /**
     * How often the engine failed on an exception of its own: a model bug, never a driver's or a
     * user's error (those get syndromes). The requester logs it and completes the request with
     * LOC_QP_OP_ERR so the queue does not wedge; every test machine's audit requires 0, so such a
     * bug fails the test that met it instead of hiding in a log.
     */
    public long engineFailures() {
        return engineFailures.get();
    }

    public long cqOverruns() {
        return cqOverruns.get();
    }

    public long rnrNaks() {
        return rnrNaks.get();
    }

    public long transportRetries() {
        return retries.get();
    }
    // ------------------------------------------------------------------ reset and removal

    /**
     * The driver lets go of the device ({@code mlx4_remove_one} without a surprise removal): every
     * QP goes to the error state with its work flushed into its CQs, every key is revoked and every
     * object freed. The device stays on the bus and the fabric, ready for the next driver.
     */
    public void reset() {
        List<HwQp> all = qps();
        for (HwQp q : all) {
            q.toError();
        }
        for (HwQp q : all) {
            q.destroy(); // waits until its WQE in flight finished: no key goes from under it
        }
        synchronized (this) {
            mptTable.freeAll();
            for (HwSrq s : pools.srqs()) {
                hw2swSrq(s); // before the CQs: an XRC SRQ holds its CQ
            }
            for (HwCq cq : pools.cqs()) {
                hw2swCq(cq);
            }
            pendingFaults.clear();
        }
    }

    /**
     * Hot-unplug: the ports leave the fabric, every QP goes to the error state and its outstanding
     * work completes with WR_FLUSH_ERR, every key is revoked. Later commands fail
     * ({@link HwCommandException#STAT_INTERNAL_ERR}). Idempotent.
     */
    public void remove() {
        List<HwQp> all;
        synchronized (this) {
            if (removed) {
                return;
            }
            removed = true;
            for (HcaPort p : ports) {
                p.active = false;
                fabric.detach(p);
            }
            all = qps();
        }
        // QPs to error first and quiet, then the keys: work in flight flushes, it does not fail on a
        // revoked key
        for (HwQp q : all) {
            q.toError();
        }
        for (HwQp q : all) {
            q.quiesce();
        }
        synchronized (this) {
            mptTable.revokeAll();
            pendingFaults.clear();
        }
        for (HcaPort p : ports) {
            detachWire(p.portNum);
        }
        scheduler.shutdown();
    }
}
