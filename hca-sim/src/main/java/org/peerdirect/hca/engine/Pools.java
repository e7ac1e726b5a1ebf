package org.peerdirect.hca.engine;

import java.util.ArrayList;
import java.util.List;

/**
 * The device's numbered objects: the QPN, CQN and SRQN tables and the CQs, SRQs and QPs they
 * number, created and freed with their use counts ({@code rxe_pool.c}'s tables, with the
 * create/destroy checks of {@code rxe_cq.c}, {@code rxe_srq.c} and {@code rxe_qp.c}).
 *
 * <p>Lock rule: every method but {@link #qp} and {@link #srq} runs under the device's monitor
 * ({@link HcaDevice}'s {@code synchronized} methods call them) and asserts it where it mutates; {@link #qp} and
 * {@link #srq} are the transport's lock-free lookups of arrays written under that monitor.
 */
final class Pools {

    private final HcaDevice dev;
    private final HwQp[] qps = new HwQp[HcaDevice.MAX_QP];
    private final IndexTable qpns = new IndexTable(HcaDevice.RESERVED_QPS, HcaDevice.MAX_QP);
    private final IndexTable cqns = new IndexTable(0, HcaDevice.MAX_CQ);
    /** From 1: a CQE's SRQ number 0 means "no SRQ" (mlx5's {@code srqn} field). */
    private final IndexTable srqns = new IndexTable(1, HcaDevice.MAX_SRQ);
    /** srqn → SRQ: what an XRC target looks a message's SRQ up in (written under the monitor, read by the transport). */
    private final HwSrq[] srqTable = new HwSrq[HcaDevice.MAX_SRQ];
    private final List<HwCq> cqs = new ArrayList<>();
    private final List<HwSrq> srqs = new ArrayList<>();

    Pools(HcaDevice dev) {
        this.dev = dev;
    }

    /**
     * Guarded by this: the number the next CQ, SRQ or QP takes (mlx4's driver-chosen CQN, SRQN or QPN, set
     * by the {@code ...At} methods for the one call they make), -1: the table allocates.
     */
    private int wanted = -1;

    /** The wanted number, claimed, or the table's next. Caller holds this. */
    int take(IndexTable t) {
        assert Thread.holdsLock(dev);
        int w = wanted;
        wanted = -1;
        if (w < 0) {
            return t.alloc();
        }
        if (!t.claim(w)) {
            throw new HwCommandException(HwCommandException.STAT_BAD_RES_STATE, dev.name + ": number " + w + " is in use or outside the table");
        }
        return w;
    }

    /** mlx4's {@code SW2HW_CQ} at the CQN the driver allocated, its CQEs handed to {@code sink} (null: the slot ring). */
    HwCq sw2hwCqAt(int cqn, int cqe, CqeSink sink) {
        assert Thread.holdsLock(dev);
        wanted = cqn;
        try {
            return sw2hwCq(cqe, sink);
        } finally {
            wanted = -1;
        }
    }

    /** mlx4's {@code SW2HW_SRQ} at the SRQN the driver allocated. */
    HwSrq sw2hwSrqAt(int srqn, int pdn, int maxWr, int maxSge) {
        assert Thread.holdsLock(dev);
        wanted = srqn;
        try {
            return newSrq(pdn, -1, null, maxWr, maxSge);
        } finally {
            wanted = -1;
        }
    }

    /**
     * {@code CREATE_CQ} of a CQ in host memory: the CQ writer hands each CQE to {@code sink}
     * (null: the slot ring).
     */
    HwCq sw2hwCq(int cqe, CqeSink sink) {
        assert Thread.holdsLock(dev);
        dev.alive();
        if (cqe < 1 || cqe > HcaDevice.MAX_CQE) {
            throw new HwCommandException(HwCommandException.STAT_BAD_SIZE, dev.name + ": CQ size " + cqe + " is not 1.." + HcaDevice.MAX_CQE);
        }
        int cqn = take(cqns);
        if (cqn < 0) {
            throw new HwCommandException(HwCommandException.STAT_EXCEED_LIM, dev.name + ": out of CQs (" + HcaDevice.MAX_CQ + " alive)");
        }
        HwCq cq = new HwCq(dev, cqn, cqe, sink);
        cqs.add(cq);
        return cq;
    }

    /** {@code HW2SW_CQ}: refused while a QP uses the CQ. Idempotent. */
    void hw2swCq(HwCq cq) {
        assert Thread.holdsLock(dev);
        if (cq.users.get() > 0) {
            throw new HwCommandException(HwCommandException.STAT_RESOURCE_BUSY, "CQ " + cq.cqn + " is still used by " + cq.users.get()
                    + " QP(s): destroy them first");
        }
        if (cqs.remove(cq)) {
            cq.markDestroyed();
            cqns.free(cq.cqn);
        }
    }

    /** {@code SW2HW_SRQ}. */
    HwSrq sw2hwSrq(int pdn, int maxWr, int maxSge) {
        return newSrq(pdn, -1, null, maxWr, maxSge);
    }

    /**
     * {@code CREATE_XRC_SRQ} / mlx4's XRC {@code SW2HW_SRQ}: an SRQ of XRC domain {@code xrcdn}
     * whose receives complete to {@code cq} (held until the SRQ goes).
     */
    HwSrq sw2hwXrcSrq(int pdn, int xrcdn, HwCq cq, int maxWr, int maxSge) {
        if (xrcdn < 0 || cq == null || cq.dev != dev || cq.isDestroyed()) {
            throw new HwCommandException(HwCommandException.STAT_BAD_RESOURCE, dev.name + ": an XRC SRQ needs an XRC domain and a live CQ of this device");
        }
        return newSrq(pdn, xrcdn, cq, maxWr, maxSge);
    }

    HwSrq newSrq(int pdn, int xrcdn, HwCq cq, int maxWr, int maxSge) {
        assert Thread.holdsLock(dev);
        dev.alive();
        if (maxWr < 1 || maxWr > HcaDevice.MAX_QP_WR || maxSge < 1 || maxSge > HcaDevice.MAX_SGE) {
            throw new HwCommandException(HwCommandException.STAT_BAD_SIZE, dev.name + ": SRQ of " + maxWr + " requests of " + maxSge
                    + " SGEs exceeds the device (" + HcaDevice.MAX_QP_WR + " x " + HcaDevice.MAX_SGE + ")");
        }
        int srqn = take(srqns);
        if (srqn < 0) {
            throw new HwCommandException(HwCommandException.STAT_EXCEED_LIM, dev.name + ": out of SRQs (" + (HcaDevice.MAX_SRQ - 1) + " alive)");
        }
        HwSrq s = new HwSrq(dev, srqn, pdn, xrcdn, cq, maxWr, maxSge);
        if (cq != null) {
            cq.users.incrementAndGet();
        }
        srqs.add(s);
        srqTable[srqn] = s;
        return s;
    }

    /** The SRQ numbered {@code srqn}, or null (the transport's lookup of an XRCETH's SRQ). */
    HwSrq srq(int srqn) {
        return srqn > 0 && srqn < HcaDevice.MAX_SRQ ? srqTable[srqn] : null;
    }

    /** {@code HW2SW_SRQ}: refused while a QP uses the SRQ. Idempotent. */
    void hw2swSrq(HwSrq s) {
        assert Thread.holdsLock(dev);
        if (s.users.get() > 0) {
            throw new HwCommandException(HwCommandException.STAT_RESOURCE_BUSY, "SRQ " + s.srqn + " is still used by " + s.users.get() + " QP(s)");
        }
        if (srqs.remove(s)) {
            s.destroyed = true;
            srqTable[s.srqn] = null;
            srqns.free(s.srqn);
            if (s.cq != null) {
                s.cq.users.decrementAndGet();
            }
        }
    }

    /**
     * mlx4's QP at the QPN the driver allocated (its {@code RST2INIT_QP} brings the QP to life
     * from the context); as {@link #createQp} otherwise.
     */
    HwQp createQpAt(int qpn, int pdn, int serviceType, QpCaps caps, HwCq scq, HwCq rcq, HwSrq srq) {
        assert Thread.holdsLock(dev);
        wanted = qpn;
        try {
            return createQp(pdn, serviceType, caps, scq, rcq, srq);
        } finally {
            wanted = -1;
        }
    }

    /**
     * Creates a QP in RST with its queues: service type {@link HcaDevice#ST_RC} or {@link HcaDevice#ST_UD}, the
     * send/receive CQs, an optional SRQ (then no own receive queue).
     */
    HwQp createQp(int pdn, int serviceType, QpCaps caps, HwCq scq, HwCq rcq, HwSrq srq) {
        assert Thread.holdsLock(dev);
        dev.alive();
        HwQp.checkInit(dev, serviceType, caps, scq, rcq, srq);
        int qpn = take(qpns);
        if (qpn < 0) {
            throw new HwCommandException(HwCommandException.STAT_EXCEED_LIM, dev.name + ": out of QP numbers (" + (HcaDevice.MAX_QP - HcaDevice.RESERVED_QPS)
                    + " QPs alive)");
        }
        HwQp qp = new HwQp(dev, qpn, pdn, serviceType, caps, scq, rcq, srq);
        scq.users.incrementAndGet();
        rcq.users.incrementAndGet();
        if (srq != null) {
            srq.users.incrementAndGet();
        }
        qps[qpn] = qp;
        return qp;
    }

    /**
     * Creates an XRC QP in RST ({@link #HcaDevice.ST_XRC}) of domain {@code xrcdn}: an initiator
     * ({@code target} false) sends through {@code scq} and has no receive side; a target has no
     * queues and no CQs ({@code caps} and {@code scq} ignored): what it receives goes to the XRC
     * SRQ each message names, which must be of the same domain.
     */
    HwQp createXrcQp(int pdn, int xrcdn, boolean target, QpCaps caps, HwCq scq) {
        assert Thread.holdsLock(dev);
        dev.alive();
        if (xrcdn < 0) {
            throw new HwCommandException(HwCommandException.STAT_BAD_PARAM, dev.name + ": an XRC QP needs an XRC domain");
        }
        QpCaps c = target ? new QpCaps(1, 0, 1, 0, 0, false) : caps;
        if (!target) {
            HwQp.checkXrcInit(dev, c, scq);
        }
        int qpn = qpns.alloc();
        if (qpn < 0) {
            throw new HwCommandException(HwCommandException.STAT_EXCEED_LIM, dev.name + ": out of QP numbers (" + (HcaDevice.MAX_QP - HcaDevice.RESERVED_QPS)
                    + " QPs alive)");
        }
        HwCq sendCq = target ? null : scq;
        HwQp qp = new HwQp(dev, qpn, pdn, HcaDevice.ST_XRC, xrcdn, target, c, sendCq, null, null);
        if (sendCq != null) {
            sendCq.users.incrementAndGet();
        }
        qps[qpn] = qp;
        return qp;
    }

    /** Frees a destroyed QP's number and its hold on its CQs and SRQ. */
    void destroyed(HwQp qp) {
        assert Thread.holdsLock(dev);
        if (qps[qp.qpn] == qp) {
            qps[qp.qpn] = null;
            qpns.free(qp.qpn);
            if (qp.scq != null) {
                qp.scq.users.decrementAndGet();
            }
            if (qp.rcq != null) {
                qp.rcq.users.decrementAndGet();
            }
            if (qp.srq != null) {
                qp.srq.users.decrementAndGet();
            }
        }
    }

    HwQp qp(int qpn) {
        return qpn > 0 && qpn < HcaDevice.MAX_QP ? qps[qpn] : null;
    }

    /** The live CQ numbered {@code cqn}, or null (a personality's doorbells name CQs by number). */
    HwCq cqByNumber(int cqn) {
        for (HwCq cq : cqs) {
            if (cq.cqn == cqn) {
                return cq;
            }
        }
        return null;
    }

    /** Every QP alive. */
    List<HwQp> qps() {
        List<HwQp> out = new ArrayList<>();
        for (HwQp q : qps) {
            if (q != null) {
                out.add(q);
            }
        }
        return out;
    }

    /** CQs alive on the device. */
    int cqCount() {
        return cqs.size();
    }

    /** The live SRQs and CQs, for a reset (caller holds the device's monitor). */
    List<HwSrq> srqs() {
        assert Thread.holdsLock(dev);
        return List.copyOf(srqs);
    }

    List<HwCq> cqs() {
        assert Thread.holdsLock(dev);
        return List.copyOf(cqs);
    }
}
