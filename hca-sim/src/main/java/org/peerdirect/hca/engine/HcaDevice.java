package org.peerdirect.hca.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.peermem.SgTable;

/**
 * One HCA's engine: its protection table, queues, ports and timer. The driver programs it with
 * firmware-style commands (named after mlx4's: {@code SW2HW_MPT}, {@code HW2SW_MPT},
 * {@code SW2HW_CQ}, ...) and rings doorbells by calling the queues.
 *
 * <p>Lock rules: {@code this} guards the object tables' writers; readers on the data path read
 * the arrays without a lock. That is safe because the objects stored in {@link #qps} and
 * {@link #mpts} publish their identity through final fields; their mutable state is volatile or
 * guarded by their own locks.
 */
public final class HcaDevice {

    /** Limits of the model (ConnectX-3-like). */
    public static final int MAX_QP = 1 << 16;
    public static final int MAX_MPT = 1 << 20;
    public static final int MAX_QP_WR = 16351;
    public static final int MAX_SGE = 32;
    public static final int MAX_CQE = 4194303;
    public static final int MAX_INLINE = 912;
    public static final int MTU = 4096;

    final String name;
    final IommuDomain domain;
    final Fabric fabric;
    final HcaPort[] ports;
    private final HwQp[] qps = new HwQp[MAX_QP];
    private final Mpt[] mpts = new Mpt[MAX_MPT];
    private final AtomicInteger nextQpn = new AtomicInteger(0x48);
    private final AtomicInteger nextMpt = new AtomicInteger(1);
    private final AtomicInteger nextKey = new AtomicInteger(0x11);
    private final List<HwCq> cqs = new ArrayList<>();
    private final List<HwSrq> srqs = new ArrayList<>();
    final ScheduledThreadPoolExecutor timer;
    volatile boolean removed;
    /** Completions whose CQ was full (CQ overrun: the CQ went to error). */
    final AtomicLong cqOverruns = new AtomicLong();
    final AtomicLong rnrNaks = new AtomicLong();
    final AtomicLong retries = new AtomicLong();

    public HcaDevice(String name, IommuDomain domain, Fabric fabric, int nports) {
        this.name = name;
        this.domain = domain;
        this.fabric = fabric;
        this.ports = new HcaPort[nports];
        for (int i = 0; i < nports; i++) {
            ports[i] = new HcaPort(this, i + 1);
            ports[i].lid = fabric.attach(ports[i]);
            ports[i].active = true;
        }
        timer = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, name + "-timer");
            t.setDaemon(true);
            return t;
        });
        timer.setRemoveOnCancelPolicy(true);
    }

    public String name() {
        return name;
    }

    public IommuDomain domain() {
        return domain;
    }

    public HcaPort port(int portNum) {
        if (portNum < 1 || portNum > ports.length) {
            throw new KernelException(Errno.EINVAL, name + ": no port " + portNum + " (ports 1.." + ports.length + ")");
        }
        return ports[portNum - 1];
    }

    public int portCount() {
        return ports.length;
    }

    void alive() {
        if (removed) {
            throw new KernelException(Errno.EIO, "device " + name + " was removed");
        }
    }

    public boolean removed() {
        return removed;
    }

    // ------------------------------------------------------------------ MPT (memory keys)

    /**
     * {@code SW2HW_MPT} with its MTT: makes the key valid for [start, start+length) with the
     * given access, translated by {@code blocks} (the umem's DMA blocks). Returns the key
     * ({@code index << 8 | key byte}, as mlx4 builds lkey/rkey).
     */
    public synchronized int sw2hwMpt(int pdn, long start, long length, int access, SgTable blocks) {
        alive();
        int index = nextMpt.getAndIncrement();
        if (index >= MAX_MPT) {
            throw new KernelException(Errno.ENOMEM, name + ": MPT table full");
        }
        int key = (index << 8) | (nextKey.getAndIncrement() & 0xff);
        mpts[index] = new Mpt(key, pdn, start, length, access, blocks);
        return key;
    }

    /** Revokes the key ({@code HW2SW_MPT}): accesses fail from now on; returns when none is in flight. */
    public void revokeMpt(int key) {
        Mpt m = mpt(key);
        if (m != null) {
            m.revoke();
        }
    }

    /** Frees the entry (after {@link #revokeMpt}). */
    public synchronized void freeMpt(int key) {
        int index = key >>> 8;
        Mpt m = mpt(key);
        if (m != null) {
            m.revoke();
            mpts[index] = null;
        }
    }

    /** The valid-or-revoked entry for a key, or null when the key names no entry. */
    Mpt mpt(int key) {
        int index = key >>> 8;
        if (index <= 0 || index >= MAX_MPT) {
            return null;
        }
        Mpt m = mpts[index];
        return m != null && m.key == key ? m : null;
    }

    // ------------------------------------------------------------------ queues

    /** {@code SW2HW_CQ}. */
    public synchronized HwCq createCq(int cqe, HwCompChannel channel) {
        alive();
        if (cqe < 1 || cqe > MAX_CQE) {
            throw new KernelException(Errno.EINVAL, name + ": CQ size " + cqe + " is not 1.." + MAX_CQE);
        }
        HwCq cq = new HwCq(this, cqe, channel);
        cqs.add(cq);
        return cq;
    }

    synchronized void destroyed(HwCq cq) {
        cqs.remove(cq);
    }

    public HwCompChannel createCompChannel() {
        alive();
        return new HwCompChannel(this);
    }

    /** {@code SW2HW_SRQ}. */
    public synchronized HwSrq createSrq(int pdn, int maxWr, int maxSge) {
        alive();
        if (maxWr < 1 || maxWr > MAX_QP_WR || maxSge < 1 || maxSge > MAX_SGE) {
            throw new KernelException(Errno.EINVAL, name + ": SRQ of " + maxWr + " requests of " + maxSge + " SGEs exceeds the device");
        }
        HwSrq s = new HwSrq(this, pdn, maxWr, maxSge);
        srqs.add(s);
        return s;
    }

    synchronized void destroyed(HwSrq s) {
        srqs.remove(s);
    }

    /** Creates a QP in RESET. */
    public synchronized HwQp createQp(int pdn, IbvQpInitAttr a) {
        alive();
        if (a.sendCq == null || a.recvCq == null) {
            throw new KernelException(Errno.EINVAL, name + ": a QP needs a send and a receive CQ");
        }
        if (!(a.sendCq instanceof HwCq scq) || !(a.recvCq instanceof HwCq rcq) || scq.dev != this || rcq.dev != this) {
            throw new KernelException(Errno.EINVAL, name + ": the CQs belong to another device");
        }
        if (a.maxSendWr < 1 || a.maxSendWr > MAX_QP_WR || a.maxRecvWr < 0 || a.maxRecvWr > MAX_QP_WR
                || a.maxSendSge < 1 || a.maxSendSge > MAX_SGE || a.maxRecvSge < 0 || a.maxRecvSge > MAX_SGE
                || a.maxInlineData < 0 || a.maxInlineData > MAX_INLINE) {
            throw new KernelException(Errno.EINVAL, String.format(
                    "%s: QP capabilities out of range (max_send_wr %d, max_recv_wr %d, max_send_sge %d, max_recv_sge %d, max_inline %d; limits %d WRs, %d SGEs, %d inline)",
                    name, a.maxSendWr, a.maxRecvWr, a.maxSendSge, a.maxRecvSge, a.maxInlineData, MAX_QP_WR, MAX_SGE, MAX_INLINE));
        }
        HwSrq srq = null;
        if (a.srq != null) {
            if (!(a.srq instanceof HwSrq s) || s.dev != this) {
                throw new KernelException(Errno.EINVAL, name + ": the SRQ belongs to another device");
            }
            srq = s;
        }
        if (scq.destroyedLocked() || rcq.destroyedLocked() || srq != null && srq.destroyed) {
            throw new KernelException(Errno.EINVAL, name + ": a CQ or the SRQ of the new QP is destroyed");
        }
        int qpn = nextQpn.getAndIncrement();
        if (qpn >= MAX_QP) {
            throw new KernelException(Errno.ENOMEM, name + ": out of QP numbers");
        }
        HwQp qp = new HwQp(this, qpn, pdn, a, scq, rcq, srq);
        qps[qpn] = qp;
        return qp;
    }

    synchronized void destroyed(HwQp qp) {
        if (qps[qp.qpn] == qp) {
            qps[qp.qpn] = null;
        }
    }

    HwQp qp(int qpn) {
        return qpn > 0 && qpn < MAX_QP ? qps[qpn] : null;
    }

    /** Every QP alive, for removal and tools. */
    public synchronized List<HwQp> qps() {
        List<HwQp> out = new ArrayList<>();
        for (HwQp q : qps) {
            if (q != null) {
                out.add(q);
            }
        }
        return out;
    }

    /** CQs alive on the device. */
    public synchronized int cqCount() {
        return cqs.size();
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
     * The driver lets go of the device (its bundle stops, {@code mlx4_remove_one} without a
     * surprise removal): every QP goes to the error state with its work flushed, every key is
     * revoked and freed, and the objects are dead (their verbs fail with EIO). The device itself
     * stays on the bus and the fabric, ready for the next driver.
     */
    public void reset() {
        List<HwQp> all;
        List<HwCq> allCqs;
        List<HwSrq> allSrqs;
        synchronized (this) {
            all = qps();
            allCqs = List.copyOf(cqs);
            allSrqs = List.copyOf(srqs);
        }
        for (HwQp q : all) {
            q.toError();
            q.dead = true;
            destroyed(q);
        }
        synchronized (this) {
            for (int i = 0; i < mpts.length; i++) {
                if (mpts[i] != null) {
                    mpts[i].revoke();
                    mpts[i] = null;
                }
            }
        }
        for (HwCq cq : allCqs) {
            cq.dead = true;
            cq.deviceRemoved();
            destroyed(cq);
        }
        for (HwSrq s : allSrqs) {
            s.dead = true;
            destroyed(s);
        }
    }

    /**
     * Hot-unplug: the ports leave the fabric, every QP goes to the error state and its
     * outstanding work completes with WR_FLUSH_ERR, every key is revoked, completion channels
     * wake up. Later commands fail with EIO. Idempotent.
     */
    public void remove() {
        List<HwQp> all;
        List<HwCq> allCqs;
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
            allCqs = List.copyOf(cqs);
            for (Mpt m : mpts) {
                if (m != null) {
                    m.revoke();
                }
            }
        }
        for (HwQp q : all) {
            q.toError();
        }
        for (HwCq cq : allCqs) {
            cq.deviceRemoved();
        }
        timer.shutdownNow();
        try {
            timer.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
